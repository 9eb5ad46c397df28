//! The labels every generated object carries, pods and widgets alike: [`APP_LABEL`] splits a
//! dataset into [`APPS`] parts (see [`dataset`](crate::dataset)).

/// The label whose value ([`app`]) splits a dataset into [`APPS`] parts, each deleted apart.
pub const APP_LABEL: &str = "app.kubernetes.io/name";

/// How many values [`APP_LABEL`] takes.
pub const APPS: usize = 50;

/// The [`APP_LABEL`] of object `i` (pods and widgets alike).
pub fn app(i: usize) -> String {
    format!("app-{}", i % APPS)
}
