//! Impersonation (`Impersonate-User`, `-Uid`, `-Group`, `-Extra-<key>`), as kube-apiserver
//! v1.36.5 checks it with constrained impersonation on (its default): the constrained modes
//! (`arbitrary-node`, `serviceaccount`, `user-info`) are tried first, each needing
//! `impersonate-on:<mode>:<verb>` on the request and `impersonate:<mode>` on the identity,
//! then the legacy `impersonate` verb on `users`, `groups`, `serviceaccounts`, `uids` and
//! `userextras`. The first mode that allows wins; when none does, the first denial is the 403.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::Authz;
use super::attrs::{Attributes, forbidden};
use super::{ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED, UserInfo};
use crate::status::ApiError;

const AUTHN_GROUP: &str = "authentication.k8s.io";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// The user the headers ask to act as, unchecked.
fn wanted(headers: &HeaderMap) -> Result<Option<UserInfo>, ApiError> {
    let one = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let mut u = UserInfo {
        name: one("impersonate-user"),
        uid: one("impersonate-uid"),
        groups: headers
            .get_all("impersonate-group")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect(),
        extra: BTreeMap::new(),
    };
    let mut has_extra = false;
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            has_extra = true;
            if let Ok(v) = value.to_str() {
                u.extra
                    .entry(percent_decode(key))
                    .or_default()
                    .push(v.to_owned());
            }
        }
    }
    if u.name.is_empty() {
        if !u.uid.is_empty() || !u.groups.is_empty() || has_extra {
            return Err(ApiError::bad_request(format!(
                "requested &user.DefaultInfo{{Name:\"\", UID:{:?}, Groups:{}, Extra:{}}} \
                 without impersonating a user name",
                u.uid,
                go_strings(&u.groups),
                go_extra(&u.extra)
            )));
        }
        return Ok(None);
    }
    Ok(Some(u))
}

fn go_strings(v: &[String]) -> String {
    if v.is_empty() {
        return "[]string(nil)".to_owned();
    }
    let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", items.join(", "))
}

fn go_extra(m: &BTreeMap<String, Vec<String>>) -> String {
    if m.is_empty() {
        return "map[string][]string(nil)".to_owned();
    }
    let items: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{k:?}:{}", go_strings(v)))
        .collect();
    format!("map[string][]string{{{}}}", items.join(", "))
}

/// `url.PathUnescape`, leaving malformed input as it is.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(x) => {
                    out.push(x);
                    i += 3;
                    continue;
                }
                None => return s.to_owned(),
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

/// `system:node:<name>` with a valid node name.
fn node_name(user: &str) -> Option<&str> {
    let name = user.strip_prefix("system:node:")?;
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    ok.then_some(name)
}

/// `system:serviceaccount:<ns>:<name>`'s namespace and name.
fn service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

fn only_name(u: &UserInfo) -> bool {
    u.uid.is_empty() && u.groups.is_empty() && u.extra.is_empty()
}

struct Checker<'a> {
    state: &'a Authz<'a>,
    requestor: &'a UserInfo,
}

impl Checker<'_> {
    fn check(&self, a: &Attributes) -> Result<(), ApiError> {
        super::rbac::authorize(self.state, self.requestor, a)
            .map(drop)
            .map_err(|reason| forbidden(self.requestor, a, &reason))
    }

    fn denied(&self, a: &Attributes, reason: &str) -> ApiError {
        forbidden(self.requestor, a, reason)
    }

    /// The identity checks of one mode (`verb`; `constrained`: a constrained mode).
    fn identity(
        &self,
        wanted: &UserInfo,
        verb: &str,
        constrained: bool,
    ) -> Result<UserInfo, ApiError> {
        let gv_group = if constrained { AUTHN_GROUP } else { "" };
        let mut actual = wanted.clone();
        let mut user_attrs = Attributes::resource(verb, gv_group, "users", "", "", &wanted.name);
        if constrained && let Some(node) = node_name(&wanted.name) {
            user_attrs.resource = "nodes".into();
            user_attrs.name = node.to_owned();
            actual.groups = vec!["system:nodes".to_owned()];
        }
        if let Some((ns, name)) = service_account(&wanted.name) {
            user_attrs.resource = "serviceaccounts".into();
            user_attrs.namespace = ns.to_owned();
            user_attrs.name = name.to_owned();
            if constrained && !wanted.groups.is_empty() {
                return Err(self.denied(
                    &user_attrs,
                    &format!(
                        "when impersonating a service account, cannot impersonate groups {}",
                        go_quoted(&wanted.groups)
                    ),
                ));
            }
            if wanted.groups.is_empty() {
                actual.groups = vec![
                    "system:serviceaccounts".to_owned(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
        }
        self.check(&user_attrs)?;
        if !wanted.uid.is_empty() {
            self.check(&Attributes::resource(
                verb,
                AUTHN_GROUP,
                "uids",
                "",
                "",
                &wanted.uid,
            ))?;
        }
        if !wanted.groups.is_empty() {
            let mut g = Attributes::resource(verb, gv_group, "groups", "", "", "");
            if constrained {
                if wanted.groups.iter().any(String::is_empty) {
                    return Err(
                        self.denied(&g, "impersonating the empty string group is not allowed")
                    );
                }
                if wanted.in_group(super::MASTERS) {
                    g.name = super::MASTERS.to_owned();
                    return Err(
                        self.denied(&g, "impersonating the system:masters group is not allowed")
                    );
                }
            }
            let mut all = false;
            if constrained && wanted.groups.len() >= 4 {
                g.name = "*".to_owned();
                all = self.check(&g).is_ok();
            }
            if !all {
                for group in &wanted.groups {
                    g.name = group.clone();
                    self.check(&g)?;
                }
            }
        }
        if !wanted.extra.is_empty() {
            let mut e = Attributes::resource(verb, AUTHN_GROUP, "userextras", "", "", "");
            if constrained {
                for (k, vs) in &wanted.extra {
                    let why = if k.is_empty() {
                        Some(
                            "impersonating the empty string key in extra is not allowed".to_owned(),
                        )
                    } else if *k != k.to_lowercase() {
                        Some(format!(
                            "impersonating a non-lowercase key in extra is not allowed: {k:?}"
                        ))
                    } else if vs.iter().any(String::is_empty) {
                        Some(
                            "impersonating the empty string value in extra is not allowed"
                                .to_owned(),
                        )
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        return Err(self.denied(&e, &why));
                    }
                }
            }
            let count: usize = wanted.extra.values().map(Vec::len).sum();
            let mut all = false;
            if constrained && count >= 4 {
                e.subresource = "*".into();
                e.name = "*".into();
                all = self.check(&e).is_ok();
            }
            if !all {
                for (k, vs) in &wanted.extra {
                    e.subresource = k.clone();
                    for v in vs {
                        e.name = v.clone();
                        self.check(&e)?;
                    }
                }
            }
        }
        if actual.name == ANONYMOUS {
            if !actual.in_group(UNAUTHENTICATED) {
                actual.groups.push(UNAUTHENTICATED.to_owned());
            }
        } else if !actual.in_group(UNAUTHENTICATED) && !actual.in_group(AUTHENTICATED) {
            actual.groups.push(AUTHENTICATED.to_owned());
        }
        Ok(actual)
    }

    /// A constrained mode: `impersonate-on:<mode>:<verb>` on the request, then the identity.
    fn constrained(
        &self,
        mode: &str,
        wanted: &UserInfo,
        request: &Attributes,
    ) -> Result<UserInfo, ApiError> {
        let mut on = request.clone();
        on.verb = format!("impersonate-on:{mode}:{}", request.verb);
        self.check(&on)?;
        self.identity(wanted, &format!("impersonate:{mode}"), true)
    }
}

fn go_quoted(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// The user a request acts as: `requestor`, or whom its `Impersonate-*` headers name when
/// `requestor` may impersonate them (403 otherwise, 400 for groups or extras without a user).
pub(crate) fn impersonate(
    state: &Authz<'_>,
    requestor: UserInfo,
    headers: &HeaderMap,
    request: &Attributes,
) -> Result<UserInfo, ApiError> {
    let Some(wanted) = wanted(headers)? else {
        return Ok(requestor);
    };
    let c = Checker {
        state,
        requestor: &requestor,
    };
    let node = node_name(&wanted.name).is_some();
    let sa = service_account(&wanted.name).is_some();
    // kube-apiserver's modes in order (the associated-node mode needs a service account
    // token bound to a node, which this server never issues): `None` when a mode does not
    // apply to the wanted user.
    let run = |i: usize| -> Option<Result<UserInfo, ApiError>> {
        match i {
            1 if only_name(&wanted) && node => {
                Some(c.constrained("arbitrary-node", &wanted, request))
            }
            2 if only_name(&wanted) && sa => {
                Some(c.constrained("serviceaccount", &wanted, request))
            }
            3 if !node && !sa => Some(c.constrained("user-info", &wanted, request)),
            4 => Some(c.identity(&wanted, "impersonate", false)),
            _ => None,
        }
    };
    let cached = state
        .auth
        .impersonation_modes
        .lock()
        .get(&requestor.name)
        .copied();
    let mut first: Option<ApiError> = None;
    let order = cached
        .into_iter()
        .chain((1..=4).filter(|i| Some(*i) != cached));
    for i in order {
        match run(i) {
            Some(Ok(u)) => {
                let mut modes = state.auth.impersonation_modes.lock();
                if modes.len() >= 10_000 {
                    modes.clear();
                }
                modes.insert(requestor.name.clone(), i);
                return Ok(u);
            }
            Some(Err(e)) => {
                first.get_or_insert(e);
            }
            None => {}
        }
    }
    Err(first.unwrap_or_else(|| ApiError::internal("all impersonation modes failed")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_read_as_kube_apiserver_reads_them() {
        let mut h = HeaderMap::new();
        assert_eq!(wanted(&h).unwrap(), None);
        h.insert("impersonate-group", "g1".parse().unwrap());
        let e = wanted(&h).unwrap_err();
        assert_eq!(e.code, 400);
        h.insert("impersonate-user", "bob".parse().unwrap());
        h.append("impersonate-group", "g2".parse().unwrap());
        h.insert("impersonate-extra-scopes%2Fx", "v".parse().unwrap());
        let u = wanted(&h).unwrap().unwrap();
        assert_eq!(u.name, "bob");
        assert_eq!(u.groups, ["g1", "g2"]);
        assert_eq!(u.extra["scopes/x"], ["v"]);
        assert_eq!(
            service_account("system:serviceaccount:ns:sa"),
            Some(("ns", "sa"))
        );
        assert_eq!(node_name("system:node:n1"), Some("n1"));
        assert_eq!(node_name("system:node:N_1"), None);
    }
}
