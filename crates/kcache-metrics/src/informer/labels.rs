//! [`ResourceLabels`]: what an informer caches, as separate Prometheus labels.

use kube_core::Resource;

/// What an informer lists and watches, as the labels of its series: `resource`, `group`,
/// `namespace`, `selector` (labels) and `field_selector`.
///
/// A label whose value is empty is left out of the series, which Prometheus treats as the
/// same series (a label with an empty value and a missing label are one and the same in its
/// data model): `kcache_informer_objects{resource="pods"}` is a Pod informer over every
/// namespace, without selectors.
///
/// [`InformerMetrics::register`](crate::InformerMetrics::register) reads them from the
/// reflector's name (see [`ResourceLabels::parse`]);
/// [`InformerMetrics::register_with_labels`](crate::InformerMetrics::register_with_labels)
/// takes them explicitly, e.g. from [`ResourceLabels::of`].
///
/// ```
/// use kcache_metrics::ResourceLabels;
///
/// let labels = ResourceLabels::parse("websites.demo.kcache.dev in namespace mon with labels app=web");
/// assert_eq!(labels.resource, "websites");
/// assert_eq!(labels.group, "demo.kcache.dev");
/// assert_eq!(labels.namespace, "mon");
/// assert_eq!(labels.selector, "app=web");
/// assert_eq!(labels.field_selector, "");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceLabels {
    /// The resource's plural name (`pods`, `deployments`, `websites`).
    pub resource: String,
    /// Its API group, empty for the core group (`apps`, `demo.kcache.dev`).
    pub group: String,
    /// The namespace watched, empty for all namespaces (or a cluster-scoped resource).
    pub namespace: String,
    /// The label selector, empty for none.
    pub selector: String,
    /// The field selector, empty for none.
    pub field_selector: String,
}

const NAMESPACE: &str = " in namespace ";
const LABELS: &str = " with labels ";
const FIELDS: &str = " with fields ";

impl ResourceLabels {
    /// The labels of an informer of `K` (plural and group from `K`), watching `namespace`
    /// (`None`: all namespaces) with `selector` (`None`: none).
    pub fn of<K>(namespace: Option<&str>, selector: Option<&str>) -> Self
    where
        K: Resource,
        K::DynamicType: Default,
    {
        let dt = K::DynamicType::default();
        Self {
            resource: K::plural(&dt).into_owned(),
            group: K::group(&dt).into_owned(),
            namespace: namespace.unwrap_or_default().to_owned(),
            selector: selector.unwrap_or_default().to_owned(),
            field_selector: String::new(),
        }
    }

    /// Sets [`field_selector`](Self::field_selector).
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = selector.into();
        self
    }

    /// Reads a reflector's name as `kcache-client` writes it:
    /// `RESOURCE[.GROUP][ in namespace NS][ with labels SEL][ with fields SEL]`
    /// (`pods`, `deployments.apps in namespace ns with labels app=web`). A name in another
    /// form (a custom `reflector::Config::name`) becomes the `resource` label whole.
    pub fn parse(name: &str) -> Self {
        let (rest, field_selector) = split_off(name, FIELDS);
        let (rest, selector) = split_off(rest, LABELS);
        let (rest, namespace) = split_off(rest, NAMESPACE);
        let (resource, group) = if rest.contains(' ') {
            (rest, "")
        } else {
            rest.split_once('.').unwrap_or((rest, ""))
        };
        Self {
            resource: resource.to_owned(),
            group: group.to_owned(),
            namespace: namespace.to_owned(),
            selector: selector.to_owned(),
            field_selector: field_selector.to_owned(),
        }
    }

    /// The non-empty labels, `resource` first.
    pub(crate) fn to_labels(&self) -> Vec<(&'static str, String)> {
        [
            ("resource", &self.resource),
            ("group", &self.group),
            ("namespace", &self.namespace),
            ("selector", &self.selector),
            ("field_selector", &self.field_selector),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k, v.clone()))
        .collect()
    }
}

/// `(before, after)` around the last `marker`, or `(s, "")`.
fn split_off<'a>(s: &'a str, marker: &str) -> (&'a str, &'a str) {
    s.rsplit_once(marker).unwrap_or((s, ""))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};

    use super::ResourceLabels;

    #[test]
    fn a_reflector_name_becomes_separate_labels() {
        let l = ResourceLabels::parse("pods");
        assert_eq!(l.to_labels(), [("resource", "pods".to_owned())]);
        let l = ResourceLabels::parse(
            "deployments.apps in namespace ns with labels app=web,tier in (a, b) with fields metadata.name=x",
        );
        assert_eq!(
            l.to_labels(),
            [
                ("resource", "deployments".to_owned()),
                ("group", "apps".to_owned()),
                ("namespace", "ns".to_owned()),
                ("selector", "app=web,tier in (a, b)".to_owned()),
                ("field_selector", "metadata.name=x".to_owned()),
            ]
        );
        let l = ResourceLabels::parse("configmaps with fields metadata.name=x");
        assert_eq!(
            (l.resource.as_str(), l.field_selector.as_str()),
            ("configmaps", "metadata.name=x")
        );
        // Not the reflector's form: the name whole.
        assert_eq!(ResourceLabels::parse("my cache").resource, "my cache");
    }

    #[test]
    fn labels_of_a_type() {
        let l = ResourceLabels::of::<Deployment>(Some("mon"), Some("app=web"));
        assert_eq!(
            l.to_labels(),
            [
                ("resource", "deployments".to_owned()),
                ("group", "apps".to_owned()),
                ("namespace", "mon".to_owned()),
                ("selector", "app=web".to_owned()),
            ]
        );
        assert_eq!(
            ResourceLabels::of::<Pod>(None, None).to_labels(),
            [("resource", "pods".to_owned())]
        );
    }
}
