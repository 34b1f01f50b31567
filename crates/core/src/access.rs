//! Who is an admin: the platform user ids listed in configuration, and nothing
//! a message says about itself.

use std::collections::HashSet;

use crate::ids::ActorId;

#[derive(Clone, Debug, Default)]
pub struct Admins {
    ids: HashSet<ActorId>,
    /// The ids in the order configuration lists them: "the first admin" means
    /// something (it is the default heartbeat target).
    ordered: Vec<ActorId>,
}

impl Admins {
    pub fn new(ids: impl IntoIterator<Item = ActorId>) -> Self {
        let ordered: Vec<ActorId> = ids.into_iter().collect();
        Self {
            ids: ordered.iter().cloned().collect(),
            ordered,
        }
    }

    /// Whether `actor` is an admin. An unverified actor never is, whatever
    /// configuration lists.
    pub fn contains(&self, actor: &ActorId) -> bool {
        actor.is_verified() && self.ids.contains(actor)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ActorId> {
        self.ordered.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unverified_actor_is_never_an_admin() {
        let listed = ActorId::new("email:unverified:alice@example.com");
        let admins = Admins::new([ActorId::new("email:alice@example.com"), listed.clone()]);
        assert!(admins.contains(&ActorId::new("email:alice@example.com")));
        assert!(!admins.contains(&listed), "even when configuration lists it");
    }
}
