//! The string formats kube-apiserver checks in custom resources
//! (`apiextensions-apiserver/pkg/apiserver/validation/formats.go`: every other format is
//! stripped from the schema and not checked; `date-time` is checked as `datetime`), with the
//! rules of kube-openapi's `strfmt` registry.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use regex::Regex;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the format patterns are constants that compile")
}

static UUID: LazyLock<Regex> =
    LazyLock::new(|| re("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> =
    LazyLock::new(|| re("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    re("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    re("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static EMAIL: LazyLock<Regex> = LazyLock::new(|| re(r"^[^@\s<>]+@[^@\s<>]+$"));
static HEXCOLOR: LazyLock<Regex> = LazyLock::new(|| re("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
    )
});
static SSN: LazyLock<Regex> = LazyLock::new(|| re(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static BSON: LazyLock<Regex> = LazyLock::new(|| re("^[0-9a-fA-F]{24}$"));
static MAC: LazyLock<Regex> = LazyLock::new(|| {
    re(
        "^([0-9a-fA-F]{2}[:-]){5}([0-9a-fA-F]{2})$|^([0-9a-fA-F]{2}[:-]){7}([0-9a-fA-F]{2})$|^([0-9a-fA-F]{2}[:-]){19}([0-9a-fA-F]{2})$|^([0-9a-fA-F]{4}\\.){2}([0-9a-fA-F]{4})$|^([0-9a-fA-F]{4}\\.){3}([0-9a-fA-F]{4})$|^([0-9a-fA-F]{4}\\.){9}([0-9a-fA-F]{4})$",
    )
});
static DATE: LazyLock<Regex> = LazyLock::new(|| re(r"^\d{4}-\d{2}-\d{2}$"));
static DATETIME: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$")
});
static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^((\d+(\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)\s*)+$",
    )
});

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn valid_date(s: &str) -> bool {
    let parts: Vec<u32> = s.split('-').filter_map(|p| p.parse().ok()).collect();
    matches!(parts.as_slice(), [_, m, d] if (1..=12).contains(m) && (1..=31).contains(d))
}

/// Whether `s` is a valid `format`; `None` when kube-apiserver does not check the format.
pub(crate) fn check(format: &str, s: &str) -> Option<bool> {
    Some(match format {
        "bsonobjectid" => BSON.is_match(s),
        "uri" => s.contains(':') || s.starts_with('/'),
        "email" => EMAIL.is_match(s),
        "hostname" => HOSTNAME.is_match(s) && s.len() <= 255,
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = match ip.parse::<IpAddr>() {
                Ok(IpAddr::V4(_)) => 32,
                Ok(IpAddr::V6(_)) => 128,
                Err(_) => return false,
            };
            bits.parse::<u32>().is_ok_and(|b| b <= max)
        }),
        "mac" => MAC.is_match(s),
        "uuid" => UUID.is_match(s),
        "uuid3" => UUID3.is_match(s),
        "uuid4" => UUID4.is_match(s),
        "uuid5" => UUID5.is_match(s),
        "hexcolor" => HEXCOLOR.is_match(s),
        "rgbcolor" => RGBCOLOR.is_match(s),
        "ssn" => SSN.is_match(s),
        "byte" => STANDARD.decode(s).is_ok(),
        "password" | "isbn" | "isbn10" | "isbn13" | "creditcard" => true,
        "date" => DATE.is_match(s) && valid_date(s),
        "datetime" | "date-time" => DATETIME.is_match(s) && s.get(..10).is_some_and(valid_date),
        "duration" => DURATION.is_match(s),
        "k8s-short-name" => dns_label(s),
        "k8s-long-name" => s.len() <= 253 && s.split('.').all(dns_label),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn formats_kube_apiserver_checks() {
        assert_eq!(check("ipv4", "10.0.0.1"), Some(true));
        assert_eq!(check("ipv4", "10.0.0"), Some(false));
        assert_eq!(
            check("uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
            Some(true)
        );
        assert_eq!(check("uuid", "nope"), Some(false));
        assert_eq!(check("date", "2024-02-30"), Some(true));
        assert_eq!(check("date", "2024-13-01"), Some(false));
        assert_eq!(check("datetime", "2014-12-15T19:30:20.000Z"), Some(true));
        assert_eq!(check("cidr", "10.0.0.0/8"), Some(true));
        assert_eq!(check("cidr", "10.0.0.0/33"), Some(false));
        assert_eq!(check("k8s-short-name", "Abc"), Some(false));
        assert_eq!(check("byte", "aGVsbG8="), Some(true));
        assert_eq!(check("byte", "%%%"), Some(false));
        // Formats kube-apiserver strips from schemas are not checked.
        assert_eq!(check("date-time", "whenever"), Some(false));
        assert_eq!(check("password", "x"), Some(true));
        assert_eq!(check("int32", "x"), None);
    }
}
