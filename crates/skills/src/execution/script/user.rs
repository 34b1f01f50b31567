//! Who a script runs as. Herald running as root runs scripts as an
//! unprivileged user (`skills.script_user`, `nobody` by default); keeping
//! root takes `script_user: root`, written on purpose. Herald running as
//! anyone else runs scripts as itself, since it cannot switch users.

use nix::unistd::{Gid, Uid, User};

use crate::error::SkillError;

/// The user root runs scripts as when none is configured.
pub(crate) const DEFAULT_SCRIPT_USER: &str = "nobody";

/// The identity a script gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RunAs {
    /// Herald's own user (root only when `script_user: root` says so).
    Herald,
    /// Another user, switched to when the script starts.
    User { name: String, uid: Uid, gid: Gid },
}

impl RunAs {
    /// Who a script runs as, from `skills.script_user`. Looks the user up in
    /// the system's user database, which may block.
    pub fn resolve(configured: Option<&str>) -> Result<Self, SkillError> {
        let euid = nix::unistd::geteuid();
        if !euid.is_root() {
            return match configured {
                None => Ok(RunAs::Herald),
                Some(name) if lookup(name)?.is_some_and(|user| user.uid == euid) => Ok(RunAs::Herald),
                Some(name) => Err(SkillError::refused(format!(
                    "skills.script_user is `{name}`, but Herald does not run as root and cannot run scripts as \
                     another user; the script was not run"
                ))),
            };
        }
        let name = configured.unwrap_or(DEFAULT_SCRIPT_USER);
        if name == "root" {
            return Ok(RunAs::Herald);
        }
        match lookup(name)? {
            Some(user) if user.uid.is_root() => Ok(RunAs::Herald),
            Some(user) => Ok(RunAs::User {
                name: name.to_owned(),
                uid: user.uid,
                gid: user.gid,
            }),
            None => Err(SkillError::refused(format!(
                "skills.script_user `{name}` is not a user on this system, so the script was not run; create the \
                 user or name another (`root` runs scripts as root)"
            ))),
        }
    }

    /// The uid and gid to switch to, if any.
    pub fn ids(&self) -> Option<(Uid, Gid)> {
        match self {
            RunAs::Herald => None,
            RunAs::User { uid, gid, .. } => Some((*uid, *gid)),
        }
    }
}

fn lookup(name: &str) -> Result<Option<User>, SkillError> {
    User::from_name(name).map_err(|err| {
        SkillError::refused(format!(
            "skills.script_user `{name}` could not be looked up ({err}); the script was not run"
        ))
    })
}
