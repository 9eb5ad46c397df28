//! [`Applied`]: what [`Context::apply_owned`](crate::Context::apply_owned) did.

/// What a server-side apply did to the object, with the object as the API server answered.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kcache_runtime::api::Applied;
///
/// let applied = Applied::Created(ConfigMap::default());
/// assert!(applied.changed());
/// assert_eq!(applied.verb(), "Created");
/// let _cm: ConfigMap = applied.into_object();
/// assert!(!Applied::Unchanged(ConfigMap::default()).changed());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Applied<C> {
    /// It did not exist: the apply created it.
    Created(C),
    /// It existed and the apply changed it (its resourceVersion moved).
    Updated(C),
    /// It existed and already held what was applied: nothing was written (kube-apiserver
    /// answers a no-op apply with the object at its resourceVersion).
    Unchanged(C),
}

impl<C> Applied<C> {
    /// The object as the API server answered.
    pub fn object(&self) -> &C {
        match self {
            Self::Created(o) | Self::Updated(o) | Self::Unchanged(o) => o,
        }
    }

    /// The object as the API server answered.
    pub fn into_object(self) -> C {
        match self {
            Self::Created(o) | Self::Updated(o) | Self::Unchanged(o) => o,
        }
    }

    /// Whether the apply created or changed the object.
    pub fn changed(&self) -> bool {
        !matches!(self, Self::Unchanged(_))
    }

    /// `Created`, `Updated` or `Unchanged`: an Event's reason, for instance.
    pub fn verb(&self) -> &'static str {
        match self {
            Self::Created(_) => "Created",
            Self::Updated(_) => "Updated",
            Self::Unchanged(_) => "Unchanged",
        }
    }
}
