//! Server-provided text made safe to show in an error: anything after a credential word
//! (`Authorization`, `Bearer`, `token=`…) withheld, control characters and bytes that are not
//! UTF-8 escaped, length capped, and text that is mostly not text described instead of shown
//! (`binary body, N bytes`) — for `Status` messages, decoder messages, non-`Status` error
//! bodies and `Location` headers. Raw bytes of a body never reach a message.

use kube_core::Status;

/// At most this many bytes of a non-`Status` error body reach an error message.
const MAX_BODY_EXCERPT: usize = 512;
/// At most this many bytes of a `Status` message reach an error message.
pub(crate) const MAX_STATUS_MESSAGE: usize = 768;

/// The words after which the rest of a server-provided text is withheld.
const CREDENTIAL_WORDS: [&str; 4] = ["authorization", "bearer", "cookie", "x-api-key"];

/// Words that name a credential only when a value follows them (`token=…`, `"password":`):
/// kube-apiserver's own messages speak of "the continue token".
const CREDENTIAL_KEYS: [&str; 4] = ["token", "password", "secret", "access_token"];

/// "continue token": kube-apiserver's pagination cursor, not a credential.
fn is_continue_token(previous: &str, word: &str) -> bool {
    previous.eq_ignore_ascii_case("continue") && word.to_ascii_lowercase().starts_with("token")
}

fn is_credential_word(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    let bare = lower.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_');
    CREDENTIAL_WORDS.iter().any(|w| bare.starts_with(w))
        || CREDENTIAL_KEYS.iter().any(|k| {
            lower
                .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
                .strip_prefix(k)
                .is_some_and(|rest| rest.starts_with(['=', ':']) || rest.starts_with("\":"))
        })
}

/// `text` from the server (a `Status` message, a decoder's message quoting the body), made
/// safe to show: anything after an `Authorization`, `Cookie`, `Bearer`… word withheld, control
/// characters escaped, at most `max` bytes.
pub(crate) fn display_safe(text: &str, max: usize) -> String {
    withhold_credentials(text, max, kcache::lister_watcher::trim_for_display)
}

/// [`display_safe`], keeping newlines and tabs (a server's multi-line message, as
/// kube-apiserver's 406 answer).
pub(crate) fn display_safe_lines(text: &str, max: usize) -> String {
    withhold_credentials(
        text,
        max,
        kcache::lister_watcher::trim_for_display_keeping_lines,
    )
}

fn withhold_credentials(text: &str, max: usize, trim: fn(&str, usize) -> String) -> String {
    // A word past the cut cannot reach the message: look no further than needed.
    let scan = &text[..floor_char_boundary(text, max.saturating_mul(2))];
    let mut previous = "";
    let kept = scan
        .split_whitespace()
        .find(|w| {
            let found = is_credential_word(w) && !is_continue_token(previous, w);
            previous = w;
            found
        })
        .map(|w| {
            // `token=value` in one word: keep up to the separator only.
            let keep = w.find(['=', ':']).map_or(w.len(), |i| i + 1);
            let end = w.as_ptr() as usize - text.as_ptr() as usize + keep;
            format!("{} [rest withheld: it may hold credentials]", &text[..end])
        });
    trim(kept.as_deref().unwrap_or(text), max)
}

fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut i = at.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Makes a `Status` from the server (an error response or a watch `ERROR` event) safe to show
/// (see [`display_safe`]; a message of 16 characters or more that is mostly not text, see
/// [`is_mostly_binary`], becomes `binary message, N bytes`), and drops a `retryAfterSeconds`
/// that is not plausible (see [`plausible_retry_after`]).
pub(crate) fn sanitize_status(status: &mut Status) {
    status.message = if status.message.chars().nth(15).is_some()
        && is_mostly_binary(status.message.as_bytes())
    {
        format!("binary message, {} bytes", status.message.len())
    } else {
        display_safe_lines(&status.message, MAX_STATUS_MESSAGE)
    };
    status.reason = display_safe(&status.reason, 64);
    if let Some(details) = status.details.as_mut() {
        let seconds = std::time::Duration::from_secs(u64::from(details.retry_after_seconds));
        if plausible_retry_after(seconds).is_none() {
            // `lister_watcher::Error::api` reads 0 as "not said".
            details.retry_after_seconds = 0;
        }
    }
}

/// `Some(d)` when a server-sent retry delay `d` is within the reflector's default backoff cap,
/// `None` when it is beyond it: a server's `Retry-After` or `retryAfterSeconds` is kept only
/// when plausible.
pub(crate) fn plausible_retry_after(d: std::time::Duration) -> Option<std::time::Duration> {
    (d <= kcache::reflector::BackoffConfig::default().max).then_some(d)
}

/// How much of a body is looked at to tell text from binary, and excerpted.
const SNIFF: usize = 16 * 1024;

/// Whether `bytes` are mostly not text: more than a quarter of the characters of its first
/// 16 KiB are bytes that are not UTF-8, control characters other than newline, carriage return
/// and tab, or U+FFFD (what a lossy decoding left of such bytes).
pub(crate) fn is_mostly_binary(bytes: &[u8]) -> bool {
    let (mut chars, mut odd) = (0usize, 0usize);
    for chunk in bytes[..bytes.len().min(SNIFF)].utf8_chunks() {
        for c in chunk.valid().chars() {
            chars += 1;
            if (c.is_control() && !matches!(c, '\n' | '\r' | '\t')) || c == '\u{fffd}' {
                odd += 1;
            }
        }
        chars += chunk.invalid().len();
        odd += chunk.invalid().len();
    }
    odd * 4 > chars
}

/// The text of `bytes` with every byte that is not UTF-8 written as `\xNN` (where a lossy
/// decoding would leave U+FFFD; control characters are left for
/// [`kcache::lister_watcher::trim_for_display`] to escape).
fn escape_invalid_utf8(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `binary body, N bytes` for a body that is mostly not text ([`is_mostly_binary`]), else
/// `None`. `declared` is the body's `Content-Length`, when the body read was cut short.
pub(crate) fn binary_body(body: &[u8], declared: Option<u64>) -> Option<String> {
    is_mostly_binary(body).then(|| {
        let n = declared.unwrap_or(body.len() as u64).max(body.len() as u64);
        format!("binary body, {n} bytes")
    })
}

/// A short, printable excerpt of an error body that is not a `Status` (an HTML page from a
/// proxy, garbage): HTML tags dropped, whitespace folded, anything after an `Authorization`,
/// `Cookie` or `Bearer` word withheld, control characters and bytes that are not UTF-8
/// escaped, at most 512 bytes; `binary body, N bytes` for a body that is mostly not text.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    body_excerpt_within(body, MAX_BODY_EXCERPT)
}

/// [`body_excerpt`], at most `max` bytes.
pub(crate) fn body_excerpt_within(body: &[u8], max: usize) -> String {
    if let Some(binary) = binary_body(body, None) {
        return binary;
    }
    let text = escape_invalid_utf8(&body[..body.len().min(SNIFF)]);
    let mut plain = String::with_capacity(text.len().min(2048));
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                plain.push(' ');
            }
            _ if in_tag => {}
            _ => plain.push(c),
        }
    }
    let mut words: Vec<&str> = Vec::new();
    for word in plain.split_whitespace() {
        let secret = is_credential_word(word)
            && !words
                .last()
                .is_some_and(|previous| is_continue_token(previous, word));
        words.push(if secret {
            &word[..word.find(['=', ':']).map_or(word.len(), |i| i + 1)]
        } else {
            word
        });
        if secret {
            words.push("[rest withheld: it may hold credentials]");
            break;
        }
    }
    let folded = words.join(" ");
    if folded.is_empty() {
        return String::new();
    }
    kcache::lister_watcher::trim_for_display(&folded, max)
}

/// Where a redirect points, safe to show: the `Location` without its user info, query and
/// fragment (which may carry credentials: `?token=…`, `user:password@`; a withheld query or
/// fragment shows as `?…`), escaped and at most 256 bytes; `None` when there is no
/// `Location`.
pub(crate) fn redirect_target(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get(http::header::LOCATION)?;
    let Ok(text) = value.to_str() else {
        return Some("a Location that is not text".to_owned());
    };
    let text = text.trim();
    let (kept, cut) = match text.find(['?', '#']) {
        Some(i) => (&text[..i], true),
        None => (text, false),
    };
    let kept = match kept.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => kept.to_owned(),
    };
    let mut shown = display_safe(&kept, 256);
    if cut {
        // The query or fragment, withheld.
        shown.push_str("?…");
    }
    Some(shown)
}
