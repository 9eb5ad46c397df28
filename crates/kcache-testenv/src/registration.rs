//! [`Webhook`]: what [`TestEnv::install_webhook`](crate::TestEnv::install_webhook) registers
//! for a [`WebhookServer`](crate::WebhookServer).

/// One admission webhook to register: a ValidatingWebhookConfiguration or a
/// MutatingWebhookConfiguration of that name with one webhook of that name, calling a path
/// of the server for some operations on some resources of every group and version
/// (`sideEffects: None`, `failurePolicy: Fail`, `admissionReviewVersions: [v1]`).
///
/// ```
/// use kcache_testenv::Webhook;
///
/// let hook = Webhook::validating("deny.example.com")
///     .operations(["CREATE"])
///     .resources(["configmaps"]);
/// assert_eq!(hook.name(), "deny.example.com");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    mutating: bool,
    name: String,
    path: String,
    operations: Vec<String>,
    resources: Vec<String>,
}

impl Webhook {
    /// A validating webhook named `name` (three dotted segments, as kube-apiserver requires),
    /// calling `/` for every operation on every resource.
    #[must_use]
    pub fn validating(name: impl Into<String>) -> Self {
        Self {
            mutating: false,
            name: name.into(),
            path: "/".into(),
            operations: vec!["*".into()],
            resources: vec!["*".into()],
        }
    }

    /// A mutating webhook; otherwise as [`validating`](Self::validating).
    #[must_use]
    pub fn mutating(name: impl Into<String>) -> Self {
        Self {
            mutating: true,
            ..Self::validating(name)
        }
    }

    /// The path of the server called (default `/`).
    #[must_use]
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// The operations it is called for: `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`
    /// (the default).
    #[must_use]
    pub fn operations<S: Into<String>>(mut self, ops: impl IntoIterator<Item = S>) -> Self {
        self.operations = ops.into_iter().map(Into::into).collect();
        self
    }

    /// The resources it is called for (`configmaps`, `pods/status`, `*/scale`, `*`: the
    /// default).
    #[must_use]
    pub fn resources<S: Into<String>>(mut self, resources: impl IntoIterator<Item = S>) -> Self {
        self.resources = resources.into_iter().map(Into::into).collect();
        self
    }

    /// Its name (also the configuration's).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it mutates (a MutatingWebhookConfiguration).
    #[must_use]
    pub fn is_mutating(&self) -> bool {
        self.mutating
    }

    pub(crate) fn path_str(&self) -> &str {
        &self.path
    }

    pub(crate) fn operation_list(&self) -> &[String] {
        &self.operations
    }

    pub(crate) fn resource_list(&self) -> &[String] {
        &self.resources
    }
}
