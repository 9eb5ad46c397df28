//! Authentication: who presented a request, as kube-apiserver's authenticator chain decides
//! (a verified client certificate, then a bearer token — the admin token, the static token
//! table, service account tokens this server issued — then anonymous).

use http::HeaderMap;
use http::header::AUTHORIZATION;

use super::AppState;
use crate::auth::UserInfo;
use crate::status::ApiError;
use crate::tls::ClientCertificate;

/// Who sent a request: `Ok(user)`, or the 401 kube-apiserver answers (a bearer token nobody
/// issued, or no credentials with anonymous auth off).
///
/// A server without an admin token (the Rust builder's plain-HTTP default) treats a request
/// without credentials as the admin, as kube-apiserver's former insecure port did; credentials
/// presented to it are still checked.
pub(crate) fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    cert: Option<&ClientCertificate>,
) -> Result<UserInfo, ApiError> {
    if let Some(c) = cert {
        return Ok(certificate_user(c));
    }
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|t| !t.is_empty());
    match bearer {
        Some(token) => token_user(state, token).ok_or_else(ApiError::unauthorized),
        None if state.config.token.is_none() => Ok(UserInfo::admin()),
        None if state.config.anonymous_auth => Ok(UserInfo::anonymous()),
        None => Err(ApiError::unauthorized()),
    }
}

/// The user of a client certificate: CN the name, each O a group, and, as kube-apiserver's
/// x509 authenticator adds, the credential id `X509SHA256=<hex of the certificate's SHA-256>`.
pub(crate) fn certificate_user(c: &ClientCertificate) -> UserInfo {
    let mut u =
        UserInfo::new(c.common_name.clone(), c.organizations.iter().cloned()).with_authenticated();
    u.extra.insert(
        CREDENTIAL_ID.to_owned(),
        vec![format!("X509SHA256={}", c.sha256)],
    );
    u
}

/// The extra key under which kube-apiserver names the credential a request authenticated with.
const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// The user a bearer token names, if any.
pub(crate) fn token_user(state: &AppState, token: &str) -> Option<UserInfo> {
    if let Some(admin) = &state.config.token
        && constant_time_eq(admin.as_bytes(), token.as_bytes())
    {
        return Some(UserInfo::admin());
    }
    if let Some(u) = state.auth.tokens.read().get(token) {
        return Some(u.clone().with_authenticated());
    }
    let t = super::token_identity(state, token)?;
    let mut u = service_account(&t.namespace, &t.name, &t.uid);
    u.extra
        .insert(CREDENTIAL_ID.to_owned(), vec![format!("JTI={}", t.jti)]);
    Some(u)
}

/// A service account's user: `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts`,
/// `system:serviceaccounts:<ns>` and `system:authenticated`.
pub(crate) fn service_account(ns: &str, name: &str, uid: &str) -> UserInfo {
    let mut u = UserInfo::new(
        format!("system:serviceaccount:{ns}:{name}"),
        [
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{ns}"),
            crate::auth::AUTHENTICATED.to_owned(),
        ],
    );
    u.uid = uid.to_owned();
    u
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_names_the_user_and_its_groups() {
        let c = ClientCertificate {
            common_name: "carol".into(),
            organizations: vec!["devs".into(), "ops".into()],
            sha256: "ab01".into(),
        };
        let u = certificate_user(&c);
        assert_eq!(u.name, "carol");
        assert_eq!(u.groups, ["devs", "ops", "system:authenticated"]);
        assert_eq!(u.extra[CREDENTIAL_ID], ["X509SHA256=ab01"]);
    }

    #[test]
    fn service_accounts_are_in_their_groups() {
        let u = service_account("ns", "sa", "u1");
        assert_eq!(u.name, "system:serviceaccount:ns:sa");
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
