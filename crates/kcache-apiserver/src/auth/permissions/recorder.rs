//! The bounded record of a running server: per user, the distinct requests and whether each
//! was allowed, denied, or both.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::{Access, CAPACITY, Record, UserRecord};
use crate::auth::UserInfo;
use crate::auth::attrs::Attributes;

/// Per distinct request: (allowed once, denied once).
type Outcomes = HashMap<Access, (bool, bool)>;

#[derive(Debug, Default)]
struct Users {
    users: HashMap<String, (Vec<String>, Outcomes)>,
    entries: usize,
    dropped: u64,
}

/// The record of a running server.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    inner: Mutex<Users>,
}

impl Recorder {
    /// Records that `user`'s request `a` was allowed or not.
    pub(crate) fn record(&self, user: &UserInfo, a: &Attributes, allowed: bool) {
        let key = Access::from_attributes(a);
        let mut inner = self.inner.lock();
        let Users {
            users,
            entries,
            dropped,
        } = &mut *inner;
        if !users.contains_key(&user.name) {
            users.insert(user.name.clone(), (user.groups.clone(), HashMap::new()));
        }
        let Some(entry) = users.get_mut(&user.name) else {
            return;
        };
        if entry.0 != user.groups {
            entry.0.clone_from(&user.groups);
        }
        let full = *entries >= CAPACITY;
        match entry.1.get_mut(&key) {
            Some(flags) => {
                flags.0 |= allowed;
                flags.1 |= !allowed;
            }
            None if full => *dropped += 1,
            None => {
                entry.1.insert(key, (allowed, !allowed));
                *entries += 1;
            }
        }
    }

    /// A snapshot.
    pub(crate) fn snapshot(&self) -> Record {
        let inner = self.inner.lock();
        let users = inner
            .users
            .iter()
            .map(|(name, (groups, set))| {
                let mut accesses: Vec<Access> = set
                    .iter()
                    .map(|(k, (allowed, denied))| Access {
                        allowed: *allowed,
                        denied: *denied,
                        ..k.clone()
                    })
                    .collect();
                accesses.sort();
                let record = UserRecord {
                    groups: groups.clone(),
                    accesses,
                };
                (name.clone(), record)
            })
            .collect();
        Record {
            users,
            dropped: inner.dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_bounded_and_counts_what_it_drops() {
        let r = Recorder::default();
        let alice = UserInfo::new("alice", ["dev"]);
        for i in 0..=CAPACITY {
            let a = Attributes::resource("get", "", "pods", "", "ns", &i.to_string());
            r.record(&alice, &a, true);
        }
        // A known entry is still updated when the record is full.
        r.record(
            &alice,
            &Attributes::resource("get", "", "pods", "", "ns", "0"),
            false,
        );
        let snap = r.snapshot();
        let rec = snap.user("alice").unwrap();
        assert_eq!((rec.accesses.len(), snap.dropped), (CAPACITY, 1));
        let first = rec.accesses.iter().find(|a| a.name == "0").unwrap();
        assert!(first.allowed && first.denied);
    }

    #[test]
    fn the_record_reads_back_from_its_yaml_and_json() {
        let r = Recorder::default();
        let sa = UserInfo::new("system:serviceaccount:ns:bot", ["system:serviceaccounts"]);
        r.record(&sa, &Attributes::non_resource("get", "/version"), true);
        r.record(
            &sa,
            &Attributes::resource("list", "apps", "deployments", "", "", ""),
            false,
        );
        let snap = r.snapshot();
        let yaml = snap.to_yaml().unwrap();
        assert_eq!(
            serde_saphyr::from_str::<Record>(&yaml).unwrap(),
            snap,
            "{yaml}"
        );
        let json = serde_json::to_string(&snap).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), snap);
        assert_eq!(
            snap.user("system:serviceaccount:ns:bot")
                .unwrap()
                .accesses
                .len(),
            2
        );
    }
}
