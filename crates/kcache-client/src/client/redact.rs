//! Server-provided text made safe to show in an error: anything after a credential word
//! (`Authorization`, `Bearer`, `token=`…) withheld, control characters escaped, length capped
//! (`Status` messages, decoder messages, non-`Status` error bodies).

use kube_core::Status;

/// At most this many bytes of a non-`Status` error body reach an error message.
const MAX_BODY_EXCERPT: usize = 512;
/// At most this many bytes of a `Status` message reach an error message.
pub(super) const MAX_STATUS_MESSAGE: usize = 768;

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
/// (see [`display_safe`]).
pub(crate) fn sanitize_status(status: &mut Status) {
    status.message = display_safe_lines(&status.message, MAX_STATUS_MESSAGE);
    status.reason = display_safe(&status.reason, 64);
}

/// A short, printable excerpt of an error body that is not a `Status` (an HTML page from a
/// proxy, garbage): HTML tags dropped, whitespace folded, anything after an `Authorization`,
/// `Cookie` or `Bearer` word withheld, control characters escaped, at most 512 bytes.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(16 * 1024)]);
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
    kcache::lister_watcher::trim_for_display(&folded, MAX_BODY_EXCERPT)
}
