//! Keep secrets out of logs and error messages.

/// `scheme://user:secret@host/...` → `scheme://user:***@host/...`; other strings unchanged.
pub fn url(u: &str) -> String {
    let Some(scheme_end) = u.find("://") else {
        return u.to_string();
    };
    let rest = &u[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => {
            format!("{}{}:***{}", &u[..scheme_end + 3], &authority[..colon], &rest[at..])
        }
        _ => u.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hides_passwords_only() {
        assert_eq!(super::url("amqp://guest:guest@127.0.0.1:5672/%2f"), "amqp://guest:***@127.0.0.1:5672/%2f");
        assert_eq!(super::url("postgres://u:p%40ss@db/x?sslmode=require"), "postgres://u:***@db/x?sslmode=require");
        assert_eq!(super::url("postgres://postgres@127.0.0.1/docpipe"), "postgres://postgres@127.0.0.1/docpipe");
        assert_eq!(super::url("http://127.0.0.1:8333"), "http://127.0.0.1:8333");
    }
}
