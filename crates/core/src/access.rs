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

    pub fn contains(&self, actor: &ActorId) -> bool {
        self.ids.contains(actor)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ActorId> {
        self.ordered.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}
