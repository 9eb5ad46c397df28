//! Shared test helpers.

use std::path::PathBuf;

pub(crate) mod protobuf_fixture;

/// A file of the fixtures recorded from kube-apiserver v1.36, in the repository's
/// `testdata/kube-apiserver-v1.36/`. Missing, it fails the test (never a skip).
pub(crate) fn fixture_file(name: &str) -> PathBuf {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/kube-apiserver-v1.36"
    ))
    .join(name);
    assert!(
        path.is_file(),
        "recorded kube-apiserver fixture missing: expected {} \
         (testdata/kube-apiserver-v1.36/ at the repository root)",
        path.display()
    );
    path
}
