//! One skill as data: its `SKILL.md` and its optional `skill.yaml`.

pub mod files;
pub mod frontmatter;
pub mod manifest;

pub use frontmatter::{ParsedSkillMd, parse_skill_md};
pub use manifest::{Component, Manifest, parse_manifest};
