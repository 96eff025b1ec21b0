//! Helpers for tests that use the library's `Host` directly.
#![allow(dead_code)]

use skillhost::api::{ListRequest, SkillList, SkillSummary};
use skillhost::{Host, HostConfig};

use super::Fixture;

/// A host over the fixture's workspace, state dir and (isolated) global dir;
/// the machine's real `~/.config` is never read.
pub fn host(fx: &Fixture) -> Host {
    let mut config = HostConfig::new(fx.workspace()).with_state_dir(fx.state_dir());
    config.global_dir = Some(fx.global_dir());
    Host::new(config)
}

pub fn list(host: &Host) -> SkillList {
    host.list(&ListRequest::default())
}

pub fn names(list: &SkillList) -> Vec<&str> {
    list.skills.iter().map(|s| s.name.as_str()).collect()
}

pub fn find<'a>(list: &'a SkillList, name: &str) -> &'a SkillSummary {
    list.skills
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("`{name}` not listed: {list:#?}"))
}
