//! One skill as data.

pub mod frontmatter;

pub use frontmatter::{ParsedSkillMd, parse_skill_md};
