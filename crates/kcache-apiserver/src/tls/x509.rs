//! The few fields of an X.509 certificate the server reads after rustls verified it: the
//! subject's common name and organizations (the user and groups of a client certificate, as
//! kube-apiserver's x509 authenticator reads them) and the validity period (for a webhook
//! certificate trusted by being listed verbatim in its `caBundle`).
//!
//! A minimal DER walk over `Certificate → TBSCertificate`: rustls/webpki verified the
//! certificate's structure and signature before, so anything unexpected here yields `None`.

/// The subject's common name (the last CN, as Go's `pkix.Name` keeps) and organizations.
pub(crate) fn subject(der: &[u8]) -> Option<(String, Vec<String>)> {
    let fields = tbs_fields(der)?;
    let mut common_name = String::new();
    let mut organizations = Vec::new();
    let mut rdns = Reader(fields.subject);
    while let Some((0x31, mut set)) = rdns.next().map(|(t, v)| (t, Reader(v))) {
        while let Some((0x30, atv)) = set.next() {
            let mut atv = Reader(atv);
            let (0x06, oid) = atv.next()? else {
                return None;
            };
            let (tag, value) = atv.next()?;
            let text = match tag {
                // UTF8String, PrintableString, IA5String, T61String (read as Latin-1).
                0x0c | 0x13 | 0x16 => String::from_utf8(value.to_vec()).ok()?,
                0x14 => value.iter().map(|b| char::from(*b)).collect(),
                // BMPString: UTF-16BE.
                0x1e => {
                    let units: Vec<u16> = value
                        .chunks_exact(2)
                        .map(|c| u16::from_be_bytes([c[0], c[1]]))
                        .collect();
                    String::from_utf16(&units).ok()?
                }
                _ => continue,
            };
            match oid {
                [0x55, 0x04, 0x03] => common_name = text,
                [0x55, 0x04, 0x0a] => organizations.push(text),
                _ => {}
            }
        }
    }
    Some((common_name, organizations))
}

/// The validity period as Unix seconds (`notBefore`, `notAfter`).
pub(crate) fn validity(der: &[u8]) -> Option<(i64, i64)> {
    let fields = tbs_fields(der)?;
    let mut r = Reader(fields.validity);
    let (t1, before) = r.next()?;
    let (t2, after) = r.next()?;
    Some((time(t1, before)?, time(t2, after)?))
}

struct TbsFields<'a> {
    validity: &'a [u8],
    subject: &'a [u8],
}

fn tbs_fields(der: &[u8]) -> Option<TbsFields<'_>> {
    let (0x30, cert) = Reader(der).next()? else {
        return None;
    };
    let (0x30, tbs) = Reader(cert).next()? else {
        return None;
    };
    let mut r = Reader(tbs);
    let mut next = r.next()?;
    if next.0 == 0xa0 {
        next = r.next()?; // the explicit [0] version
    }
    let (0x02, _serial) = next else {
        return None;
    };
    let (0x30, _signature) = r.next()? else {
        return None;
    };
    let (0x30, _issuer) = r.next()? else {
        return None;
    };
    let (0x30, validity) = r.next()? else {
        return None;
    };
    let (0x30, subject) = r.next()? else {
        return None;
    };
    Some(TbsFields { validity, subject })
}

/// UTCTime (`YYMMDDHHMMSSZ`, years 1950–2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn time(tag: u8, value: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(value).ok()?.strip_suffix('Z')?;
    let full = match (tag, s.len()) {
        (0x17, 12) => {
            let yy: i64 = s[..2].parse().ok()?;
            format!("{}{s}", if yy < 50 { "20" } else { "19" })
        }
        (0x18, 14) => s.to_owned(),
        _ => return None,
    };
    if !full.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |a: usize, b: usize| full[a..b].parse::<i64>().ok();
    let (y, mo, d) = (n(0, 4)?, n(4, 6)?, n(6, 8)?);
    let (h, mi, sec) = (n(8, 10)?, n(10, 12)?, n(12, 14)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// DER elements one after the other: `(tag, contents)`.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        let (&tag, rest) = self.0.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, &rest[n..])
        };
        if rest.len() < len {
            return None;
        }
        let (value, rest) = rest.split_at(len);
        self.0 = rest;
        Some((tag, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_subject_and_validity_of_a_generated_certificate() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "jane");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        params.not_before = rcgen::date_time_ymd(2001, 2, 3);
        params.not_after = rcgen::date_time_ymd(2061, 12, 31);
        let cert = params.self_signed(&key).unwrap();
        let (cn, orgs) = subject(cert.der()).expect("a subject");
        assert_eq!(cn, "jane");
        assert_eq!(orgs, vec!["system:masters".to_owned()]);
        let (before, after) = validity(cert.der()).expect("a validity");
        assert_eq!(before, 981_158_400, "2001-02-03T00:00:00Z");
        assert_eq!(after, 2_903_212_800, "2061-12-31T00:00:00Z");
    }

    #[test]
    fn garbage_is_none_not_a_panic() {
        for bytes in [
            &b""[..],
            b"\x30",
            b"\x30\x84\xff\xff\xff\xff",
            b"\x30\x03\x30\x01",
        ] {
            assert_eq!(subject(bytes), None);
            assert_eq!(validity(bytes), None);
        }
    }
}
