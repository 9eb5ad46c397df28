//! Admission webhooks, as kube-apiserver's `MutatingAdmissionWebhook` and
//! `ValidatingAdmissionWebhook` plugins run them.
//!
//! - `config.rs`: the webhook configurations as objects (defaults, validation);

pub(crate) mod config;
