//! The remote's URL: read into where to connect and how to authenticate, and redacted for
//! every message.
//!
//! The credentials are everything between `//` and the *last* `@`, found before anything
//! else is parsed: a password may hold `/`, `?`, `#`, `:` or `@`, and a URL that does not
//! parse must still never be printed with it.

/// The scheme, then `***` for the credentials, then what follows the last `@`: how every
/// message names the remote. A text that is not a URL of a known shape is not quoted at all.
pub fn redact(url: &str) -> String {
    let url = url.trim();
    let Some(scheme_end) = url.find("://") else {
        return "<remote URL>".to_owned();
    };
    let scheme = &url[..scheme_end];
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
    {
        return "<remote URL>".to_owned();
    }
    let rest = &url[scheme_end + 3..];
    match rest.rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// One server: host name or address, and port.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Node {
    /// A name, an IPv4 address or an IPv6 address (without brackets).
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// What `AUTH` sends: Redis 6 ACL user (optional) and password.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub user: Option<Vec<u8>>,
    pub password: Option<Vec<u8>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.password.is_some() {
            "Credentials(***)"
        } else {
            "Credentials(none)"
        })
    }
}

/// A remote URL, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub tls: bool,
    pub cluster: bool,
    /// One node, or a Cluster's seed nodes.
    pub nodes: Vec<Node>,
    pub credentials: Credentials,
    pub db: u32,
}

/// Why a URL cannot be used. The text never quotes the credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlProblem {
    /// Not one of the four schemes.
    #[error("use redis://, rediss:// (TLS), redis+cluster:// or rediss+cluster://")]
    Scheme,
    /// No host, or an empty one in a list.
    #[error("no host")]
    NoHost,
    /// A single-server URL with several hosts.
    #[error("several hosts: use redis+cluster:// for a Redis Cluster")]
    SeveralHosts,
    /// A host whose port is not a number from 1 to 65535.
    #[error("bad port in `{0}`")]
    Port(String),
    /// An IPv6 address whose bracket is not closed.
    #[error("bad host `{0}`")]
    Host(String),
    /// The database is not a number.
    #[error("bad database `{0}` (a number, e.g. /0)")]
    Database(String),
    /// A Cluster has one database.
    #[error("a Redis Cluster has only database 0")]
    ClusterDatabase,
    /// `%` not followed by two hex digits in the user name or password.
    #[error("bad %-escape in the user name or password")]
    Escape,
    /// A fragment such as `#insecure`.
    #[error("`#{0}` is not supported (certificates are always verified; trust a private CA with SSL_CERT_FILE)")]
    Fragment(String),
}

impl Endpoint {
    /// Reads `url`: `scheme://[[user]:password@]host[:port][/db][?...]`, with a
    /// comma-separated host list for a Cluster. Query parameters are ignored.
    pub(crate) fn parse(url: &str) -> Result<Self, UrlProblem> {
        let url = url.trim();
        let (scheme, rest) = url.split_once("://").ok_or(UrlProblem::Scheme)?;
        let (tls, cluster) = match scheme {
            "redis" => (false, false),
            "rediss" => (true, false),
            "redis+cluster" => (false, true),
            "rediss+cluster" => (true, true),
            _ => return Err(UrlProblem::Scheme),
        };
        // The credentials first, up to the last `@`: nothing in them is a delimiter.
        let (userinfo, rest) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let credentials = match userinfo {
            None => Credentials::default(),
            Some(info) => match info.split_once(':') {
                Some((user, password)) => Credentials {
                    user: (!user.is_empty()).then(|| unescape(user)).transpose()?,
                    password: Some(unescape(password)?),
                },
                None => Credentials {
                    user: (!info.is_empty()).then(|| unescape(info)).transpose()?,
                    password: None,
                },
            },
        };
        let (rest, fragment) = match rest.split_once('#') {
            Some((rest, fragment)) => (rest, Some(fragment)),
            None => (rest, None),
        };
        if let Some(fragment) = fragment {
            return Err(UrlProblem::Fragment(fragment.to_owned()));
        }
        let rest = rest.split_once('?').map_or(rest, |(rest, _query)| rest);
        let (hosts, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash + 1..]),
            None => (rest, ""),
        };
        let db = match path.trim_end_matches('/') {
            "" => 0,
            text => text
                .parse::<u32>()
                .map_err(|_| UrlProblem::Database(text.to_owned()))?,
        };
        if cluster && db != 0 {
            return Err(UrlProblem::ClusterDatabase);
        }
        let nodes = hosts
            .split(',')
            .map(parse_node)
            .collect::<Result<Vec<_>, _>>()?;
        if !cluster && nodes.len() > 1 {
            return Err(UrlProblem::SeveralHosts);
        }
        Ok(Self {
            tls,
            cluster,
            nodes,
            credentials,
            db,
        })
    }
}

fn parse_node(text: &str) -> Result<Node, UrlProblem> {
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| UrlProblem::Host(text.to_owned()))?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return Err(UrlProblem::Host(text.to_owned())),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(UrlProblem::NoHost);
    }
    let port = match port {
        None => 6379,
        Some(port) => match port.parse::<u16>() {
            Ok(port) if port != 0 => port,
            _ => return Err(UrlProblem::Port(text.to_owned())),
        },
    };
    Ok(Node {
        host: host.to_owned(),
        port,
    })
}

/// `%XX` escapes decoded (a password may need them for characters a URL cannot hold).
fn unescape(text: &str) -> Result<Vec<u8>, UrlProblem> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(UrlProblem::Escape)?;
            let hex = std::str::from_utf8(hex).map_err(|_| UrlProblem::Escape)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| UrlProblem::Escape)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_everything_up_to_the_last_at() {
        assert_eq!(redact("redis://h:6379/0"), "redis://h:6379/0");
        assert_eq!(redact("redis://:s3cret@h:6379/0"), "redis://***@h:6379/0");
        assert_eq!(redact("rediss://u:p@w@h/1?x=1"), "rediss://***@h/1?x=1");
        // Delimiters inside the password do not end the credentials.
        assert_eq!(
            redact("redis://:Tr0ub4dor&3/x@host/0"),
            "redis://***@host/0"
        );
        assert_eq!(redact("redis://:pa#ss@host/0"), "redis://***@host/0");
        assert_eq!(redact("redis://:pa?ss@host/0"), "redis://***@host/0");
        assert_eq!(redact("redis://:ss:word@host/0"), "redis://***@host/0");
        assert_eq!(redact("no url s3cret"), "<remote URL>");
        assert_eq!(redact("pw@x://host"), "<remote URL>");
        assert_eq!(redact("  redis://:pw@h/0 "), "redis://***@h/0");
    }

    #[test]
    fn urls_are_read_with_passwords_that_hold_delimiters() {
        let e = Endpoint::parse("redis://:Tr0ub4dor&3/x@host/0").unwrap();
        assert_eq!(
            e.credentials.password.as_deref(),
            Some(&b"Tr0ub4dor&3/x"[..])
        );
        assert_eq!(
            e.nodes,
            [Node {
                host: "host".into(),
                port: 6379
            }]
        );
        let e = Endpoint::parse("rediss://bob:ss:w%40rd@[::1]:7000/3?protocol=resp2").unwrap();
        assert!(e.tls && !e.cluster);
        assert_eq!(e.credentials.user.as_deref(), Some(&b"bob"[..]));
        assert_eq!(e.credentials.password.as_deref(), Some(&b"ss:w@rd"[..]));
        assert_eq!(
            e.nodes,
            [Node {
                host: "::1".into(),
                port: 7000
            }]
        );
        assert_eq!(e.db, 3);
        let e = Endpoint::parse("redis+cluster://:pw@a:1,b:2").unwrap();
        assert!(e.cluster);
        assert_eq!(e.nodes.len(), 2);
        assert_eq!(
            Endpoint::parse("redis+cluster://a:1/2"),
            Err(UrlProblem::ClusterDatabase)
        );
        assert_eq!(
            Endpoint::parse("redis://a:1,b:2"),
            Err(UrlProblem::SeveralHosts)
        );
        assert_eq!(Endpoint::parse("http://h"), Err(UrlProblem::Scheme));
        assert_eq!(Endpoint::parse("redis://"), Err(UrlProblem::NoHost));
        assert!(matches!(
            Endpoint::parse("redis://h:0"),
            Err(UrlProblem::Port(_))
        ));
        assert!(matches!(
            Endpoint::parse("redis://h/x"),
            Err(UrlProblem::Database(_))
        ));
        assert!(matches!(
            Endpoint::parse("rediss://h#insecure"),
            Err(UrlProblem::Fragment(_))
        ));
        assert_eq!(Endpoint::parse("redis://:%zz@h"), Err(UrlProblem::Escape));
    }
}
