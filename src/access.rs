//! Who may call which tool: the `read`, `execute` and `write` scopes, one
//! rule for every face. Over HTTP a token grants an [`Access`]; over stdio
//! there is none to check (the client owns the process).

use crate::error::{ErrorKind, HostError};

/// The scopes a caller holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access {
    pub read: bool,
    pub execute: bool,
    pub write: bool,
}

impl Access {
    /// The scope a tool needs: `read` (skill_list, skill_load, skill_read),
    /// `execute` (skill_run) or `write` (the management tools).
    pub fn scope_for(tool: &str) -> &'static str {
        match tool {
            "skill_list" | "skill_load" | "skill_read" => "read",
            "skill_run" => "execute",
            _ => "write",
        }
    }

    /// Whether `scope` is granted.
    pub fn allows(&self, scope: &str) -> bool {
        match scope {
            "read" => self.read,
            "execute" => self.execute,
            _ => self.write,
        }
    }

    /// `ACCESS_DENIED` unless this access may call `tool`.
    pub fn check(&self, tool: &str) -> Result<(), HostError> {
        let scope = Self::scope_for(tool);
        if self.allows(scope) {
            return Ok(());
        }
        let mut message = format!("this token lacks the `{scope}` scope that {tool} needs");
        if scope == "write" {
            message.push_str(" (and writes need a server started with --allow-write)");
        }
        Err(HostError::new(ErrorKind::AccessDenied, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_needs_its_scope() {
        let read = Access {
            read: true,
            ..Access::default()
        };
        assert!(read.check("skill_load").is_ok());
        let denied = read.check("skill_run").unwrap_err();
        assert_eq!(denied.kind, ErrorKind::AccessDenied);
        assert!(denied.message.contains("`execute`"), "{}", denied.message);
        assert!(read.check("skill_install").is_err());
        let all = Access {
            read: true,
            execute: true,
            write: true,
        };
        for tool in ["skill_list", "skill_run", "skill_activate"] {
            assert!(all.check(tool).is_ok(), "{tool}");
        }
    }
}
