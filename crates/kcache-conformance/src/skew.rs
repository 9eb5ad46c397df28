//! Releases of kube-apiserver other than the one `kcache-apiserver` models.
//!
//! The embedded server models kube-apiserver v1.36 ([`MODEL_MINOR`]). Against another release
//! a differential test sees the release's own changes (resources added, a default or a
//! message changed) as differences. Each such difference is recorded beside the test that
//! sees it, with the reason, as a [`Recorded`]; [`check`] then requires the differences a run
//! found to be exactly the recorded ones for that release: a new difference fails as before,
//! and so does a recorded one that no longer occurs, so the list stays true. Against the
//! model release the recorded lists do not apply: every difference fails.
//!
//! ```
//! use std::collections::BTreeSet;
//! use kcache_conformance::skew::{Recorded, check};
//!
//! const RECORDED: &[Recorded] = &[Recorded {
//!     releases: &[37],
//!     line: "apps/v1 statefulsets: default maxUnavailable",
//!     why: "MaxUnavailableStatefulSet is on by default from 1.37",
//! }];
//! let found: BTreeSet<String> = ["apps/v1 statefulsets: default maxUnavailable".to_owned()].into();
//! assert!(check("example", 37, &found, RECORDED).is_ok());
//! assert!(check("example", 36, &found, RECORDED).is_err());
//! assert!(check("example", 37, &BTreeSet::new(), RECORDED).is_err());
//! ```

use std::collections::BTreeSet;

use crate::Target;

/// The minor version of the kube-apiserver release `kcache-apiserver` models (v1.36.5: its
/// discovery, OpenAPI, RBAC bootstrap and protobuf data files).
pub const MODEL_MINOR: u32 = 36;

/// A difference a differential test sees against one release, and why it is that release's
/// and not a bug of the embedded server.
#[derive(Debug, Clone, Copy)]
pub struct Recorded {
    /// The releases' minor versions (`37` for v1.37.x).
    pub releases: &'static [u32],
    /// The difference, as the test words it.
    pub line: &'static str,
    /// Why the release answers so.
    pub why: &'static str,
}

/// The minor version of the server behind `target`, from its `/version`.
///
/// # Errors
/// When `/version` does not answer 200 or its `minor` is not a number (`"37+"` reads as 37).
pub async fn minor(target: &Target) -> anyhow::Result<u32> {
    let r = target.send("GET", "/version", None).await?;
    anyhow::ensure!(r.status == 200, "GET /version: {}", r.status);
    let minor = r.body["minor"].as_str().unwrap_or_default();
    minor
        .trim_end_matches('+')
        .parse()
        .map_err(|_| anyhow::anyhow!("/version gave minor {minor:?}, not a number"))
}

/// Checks that `found`, the differences `test` saw against release `minor`, are exactly those
/// `recorded` lists for that release (none for [`MODEL_MINOR`] or a release without records).
///
/// # Errors
/// A message naming the test, the release, each unrecorded difference and each recorded one
/// that did not occur.
pub fn check(
    test: &str,
    minor: u32,
    found: &BTreeSet<String>,
    recorded: &[Recorded],
) -> Result<(), String> {
    let expected: BTreeSet<&str> = if minor == MODEL_MINOR {
        BTreeSet::new()
    } else {
        recorded
            .iter()
            .filter(|r| r.releases.contains(&minor))
            .map(|r| r.line)
            .collect()
    };
    let new: Vec<&str> = found
        .iter()
        .map(String::as_str)
        .filter(|l| !expected.contains(l))
        .collect();
    let gone: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|l| !found.contains(*l))
        .collect();
    if new.is_empty() && gone.is_empty() {
        return Ok(());
    }
    let mut msg = format!("{test} against kube-apiserver 1.{minor}:");
    for l in &new {
        msg.push_str(&format!("\n  differs (not recorded for 1.{minor}): {l}"));
    }
    for l in &gone {
        msg.push_str(&format!(
            "\n  recorded for 1.{minor} but no longer differs: {l}"
        ));
    }
    Err(msg)
}
