use super::*;
use proptest::prelude::*;

fn parse(s: &str) -> RowName {
    s.parse()
        .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
}

#[test]
fn every_kind_parses_to_its_parts() {
    let url = || ContentUrl::parse("https://example.com/docs/intro").unwrap();
    let en_gb = || Some(Locale::new("en", Some("GB")).unwrap());
    let alice = || UserId::new("alice@corp.example").unwrap();
    let cases: Vec<(&str, RowName)> = vec![
        ("https://example.com/docs/intro", RowName::Content(url())),
        (
            "https://example.com/docs/intro#3",
            Branch::new(url(), 3).into(),
        ),
        (
            "https://example.com/docs/intro#en_GB/3.17",
            Branch::new(url(), 3).revision(en_gb(), 17).into(),
        ),
        (
            "https://example.com/docs/intro#haw/3.0",
            Branch::new(url(), 3)
                .revision(Some(Locale::new("haw", None).unwrap()), 0)
                .into(),
        ),
        (
            "https://example.com/docs/intro#0.1",
            Branch::new(url(), 0).revision(None, 1).into(),
        ),
        (
            "https://example.com/docs/intro#user/alice@corp.example/en_GB/3",
            Branch::new(url(), 3).draft(alice(), en_gb()).into(),
        ),
        (
            "https://example.com/docs/intro#user/alice@corp.example/3",
            Branch::new(url(), 3).draft(alice(), None).into(),
        ),
        (
            "https://example.com/docs/intro#suggestion/en_GB/3",
            Branch::new(url(), 3).suggestion(en_gb()).into(),
        ),
        (
            "https://example.com/docs/intro#suggestion/3",
            Branch::new(url(), 3).suggestion(None).into(),
        ),
        (
            "user/alice@corp.example",
            User {
                domain: None,
                user: alice(),
            }
            .into(),
        ),
        (
            "example.com/user/alice@corp.example",
            User {
                domain: Some(Domain::new("example.com").unwrap()),
                user: alice(),
            }
            .into(),
        ),
    ];
    for (text, expected) in cases {
        let got = parse(text);
        assert_eq!(got, expected, "{text}");
        assert_eq!(got.to_string(), text, "canonical names print as they are");
    }
}

#[test]
fn parts_as_json() {
    let json = |s: &str| serde_json::to_value(parse(s).parts()).unwrap();
    assert_eq!(
        json("https://Example.com/a#en_GB/3.17"),
        serde_json::json!({
            "name": "https://example.com/a#en_GB/3.17",
            "kind": "revision",
            "url": "https://example.com/a",
            "branch": 3,
            "revision": 17,
            "locale": "en_GB",
            "language": "en",
            "country": "GB",
        })
    );
    assert_eq!(
        json("https://example.com/a#user/bob/fr/2"),
        serde_json::json!({
            "name": "https://example.com/a#user/bob/fr/2",
            "kind": "draft",
            "url": "https://example.com/a",
            "branch": 2,
            "locale": "fr",
            "language": "fr",
            "user": "bob",
        })
    );
    assert_eq!(
        json("EXAMPLE.com/user/bob"),
        serde_json::json!({
            "name": "example.com/user/bob",
            "kind": "user",
            "user": "bob",
            "domain": "example.com",
        })
    );
    assert_eq!(
        json("http://example.com"),
        serde_json::json!({
            "name": "http://example.com/",
            "kind": "content",
            "url": "http://example.com/",
        })
    );
}

#[test]
fn urls_are_made_canonical() {
    for (given, canonical) in [
        ("HTTPS://Example.COM/a", "https://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com/a/%2e%2E/c", "https://example.com/c"),
        (
            "https://example.com/%7euser/%41%62",
            "https://example.com/~user/Ab",
        ),
        (
            "https://example.com/a%2fb%3a",
            "https://example.com/a%2Fb%3A",
        ),
        (
            "https://example.com/caf\u{e9}",
            "https://example.com/caf%C3%A9",
        ),
        ("https://example.com/a?", "https://example.com/a"),
        ("https://example.com/a?#", "https://example.com/a"),
        (
            "https://example.com/a?q=%7e%2f",
            "https://example.com/a?q=~%2F",
        ),
        (
            "https://example.com/a?b=1&a=2",
            "https://example.com/a?b=1&a=2",
        ),
        (
            "https://B\u{fc}cher.example/",
            "https://xn--bcher-kva.example/",
        ),
        ("https://[0:0::1]/a", "https://[::1]/a"),
        ("https://127.000.0.1/a", "https://127.0.0.1/a"),
        ("https://example.com/%zz", "https://example.com/%25zz"),
        (
            "https://example.com/%%30a?%%33",
            "https://example.com/%250a?%253",
        ),
    ] {
        let url = ContentUrl::parse(given).unwrap_or_else(|e| panic!("{given}: {e}"));
        assert_eq!(url.as_str(), canonical, "{given}");
        assert_eq!(ContentUrl::parse(canonical).unwrap(), url, "{canonical}");
        // The same goes for every kind built on it.
        if !given.contains('#') {
            assert_eq!(
                parse(&format!("{given}#7")).to_string(),
                format!("{canonical}#7")
            );
        }
    }
}

/// A table of malformed names and the part their error must name.
#[test]
fn malformed_names_say_what_is_wrong() {
    let cases: &[(&str, &str)] = &[
        ("", "must not be empty"),
        ("https://example.com/a b", "whitespace"),
        ("https://example.com/a#3\n", "whitespace"),
        ("example.com/a", "neither a content URL"),
        ("example.com/a#3", "is not a content URL"),
        ("https//example.com/a", "neither a content URL"),
        ("ftp://example.com/a", "scheme \"ftp\" is not http or https"),
        ("https://", "not a valid absolute URL"),
        ("https://exa%mple.com/", "not a valid absolute URL"),
        ("https://example.com:99999/", "not a valid absolute URL"),
        ("https://bob:pw@example.com/", "user name or password"),
        ("https://bob@example.com/", "user name or password"),
        ("https://example.com/a#x", "the branch \"x\""),
        ("https://example.com/a#-1", "the branch \"-1\""),
        ("https://example.com/a#01", "leading zero"),
        ("https://example.com/a#+3", "the branch \"+3\""),
        (
            "https://example.com/a#18446744073709551616",
            "larger than the largest",
        ),
        ("https://example.com/a#3.", "the revision \"\""),
        ("https://example.com/a#.3", "the branch \"\""),
        ("https://example.com/a#3.x", "the revision \"x\""),
        ("https://example.com/a#3.1.2", "the revision \"1.2\""),
        ("https://example.com/a#3.007", "leading zero"),
        ("https://example.com/a#EN_GB/3.1", "the language \"EN\""),
        ("https://example.com/a#e/3.1", "the language \"e\""),
        ("https://example.com/a#engl/3.1", "the language \"engl\""),
        ("https://example.com/a#en-GB/3.1", "write a locale with '_'"),
        ("https://example.com/a#en_gb/3.1", "the country \"gb\""),
        ("https://example.com/a#en_GBR/3.1", "the country \"GBR\""),
        ("https://example.com/a#en_/3.1", "the country \"\""),
        ("https://example.com/a#en_GB/3", "a branch has no locale"),
        ("https://example.com/a#en_GB/x.1", "the branch \"x\""),
        ("https://example.com/a#en/GB/3.1", "the part after '#'"),
        ("https://example.com/a#/3", "the language \"\""),
        ("https://example.com/a#user/alice", "the draft part"),
        ("https://example.com/a#user/alice/en/GB/3", "the draft part"),
        ("https://example.com/a#user//3", "the user identifier \"\""),
        ("https://example.com/a#user/alice/x", "the branch \"x\""),
        (
            "https://example.com/a#user/alice/EN/3",
            "the language \"EN\"",
        ),
        (
            "https://example.com/a#user/alice/en_GB/3.1",
            "the branch \"3.1\"",
        ),
        ("https://example.com/a#suggestion", "the suggestion part"),
        (
            "https://example.com/a#suggestion/en/GB/3",
            "the suggestion part",
        ),
        ("https://example.com/a#suggestion/x", "the branch \"x\""),
        (
            "https://example.com/a#suggestion/en_us/3",
            "the country \"us\"",
        ),
        ("https://example.com/a#3#4", "the branch \"3#4\""),
        ("user/", "the user identifier \"\""),
        ("user", "neither a content URL"),
        ("suggestion", "neither a content URL"),
        (
            "user/a/b",
            "the user identifier \"a/b\" is not valid: it contains '/'",
        ),
        ("user/user/a/b", "the user identifier \"user/a/b\""),
        ("user/a#b", "'#' may only follow"),
        ("users/alice", "neither a content URL"),
        ("example.com/users/alice", "neither a content URL"),
        ("/user/alice", "the domain \"\""),
        ("exa%mple.com/user/alice", "the domain \"exa%mple.com\""),
        ("exa<mple.com/user/alice", "the domain \"exa<mple.com\""),
        ("example.com:80/user/alice", "host name only"),
        ("a/b/user/alice", "neither a content URL"),
    ];
    let long_user = format!("user/{}", "x".repeat(MAX_USER_ID_BYTES + 1));
    let mut all: Vec<(&str, &str)> = cases.to_vec();
    all.push((&long_user, "the most is 256"));
    for &(bad, expect) in &all {
        match bad.parse::<RowName>() {
            Ok(n) => panic!("{bad:?} parsed as {n:?}"),
            Err(Error::InvalidName { reason, .. }) => {
                assert!(
                    reason.contains(expect),
                    "{bad:?}: {reason:?} lacks {expect:?}"
                )
            }
            Err(other) => panic!("{bad:?}: wrong error variant {other:?}"),
        }
    }
}

#[test]
fn constructors_check_their_parts() {
    assert!(Locale::new("en", Some("GB")).is_ok());
    assert!(Locale::new("EN", None).is_err());
    assert!(Locale::new("en", Some("G")).is_err());
    assert_eq!("en_GB".parse::<Locale>().unwrap().country(), Some("GB"));
    assert!("en_GB_x".parse::<Locale>().is_err());
    assert!(UserId::new("a/b").is_err());
    assert!(UserId::new("a#b").is_err());
    assert!(UserId::new("Ünïcødé").is_ok());
    assert_eq!(Domain::new("EXAMPLE.com").unwrap().as_str(), "example.com");
    assert!(Domain::new("https://example.com").is_err());
    let err = ContentUrl::parse("https://example.com/a#frag").unwrap_err();
    assert!(
        err.to_string().contains("'#' starts the branch part"),
        "{err}"
    );
}

// ---- property tests: every kind round-trips ----

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9_~-]{1,8}",
        1 => Just(".".to_owned()),
        1 => Just("..".to_owned()),
        1 => Just("%2e".to_owned()),
        1 => "%[0-9a-fA-F]{2}",
        1 => "[!$&'()*+,;=:@ä€]{1,3}",
        1 => Just(String::new()),
    ]
}

/// URL strings in many spellings, most of them not canonical.
fn url_text() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("http"), Just("https"), Just("HTTPS"), Just("Http")],
        "[a-zA-Z][a-zA-Z0-9-]{0,10}(\\.[a-zA-Z]{2,5}){0,2}",
        prop_oneof![
            Just(String::new()),
            Just(":80".to_owned()),
            Just(":443".to_owned()),
            (1u16..).prop_map(|p| format!(":{p}"))
        ],
        prop::collection::vec(segment(), 0..5),
        prop_oneof![
            Just(String::new()),
            Just("?".to_owned()),
            "\\?[a-z0-9=&%~]{1,12}"
        ],
    )
        .prop_map(|(scheme, host, port, segs, query)| {
            format!("{scheme}://{host}{port}/{}{query}", segs.join("/"))
        })
}

fn content() -> impl Strategy<Value = ContentUrl> {
    url_text().prop_filter_map("not a URL", |s| ContentUrl::parse(&s).ok())
}

fn locale() -> impl Strategy<Value = Option<Locale>> {
    prop::option::of(
        ("[a-z]{2,3}", prop::option::of("[A-Z]{2}"))
            .prop_map(|(l, c)| Locale::new(&l, c.as_deref()).unwrap()),
    )
}

fn user_id() -> impl Strategy<Value = UserId> {
    "[^/#\\s\\p{Cc}]{1,30}".prop_map(|s| UserId::new(&s).unwrap())
}

fn domain() -> impl Strategy<Value = Domain> {
    // The pattern can spell an `xn--` label that is not valid punycode:
    // Domain::new rightly refuses it, so such strings are skipped.
    "[a-zA-Z][a-zA-Z0-9-]{0,10}(\\.[a-zA-Z]{2,5}){0,2}"
        .prop_filter_map("not a valid domain", |s| Domain::new(&s).ok())
}

fn row_name() -> impl Strategy<Value = RowName> {
    prop_oneof![
        content().prop_map(RowName::Content),
        (content(), any::<u64>()).prop_map(|(c, b)| Branch::new(c, b).into()),
        (content(), locale(), any::<u64>(), any::<u64>()).prop_map(|(c, l, b, r)| Branch::new(
            c, b
        )
        .revision(l, r)
        .into()),
        (content(), user_id(), locale(), any::<u64>())
            .prop_map(|(c, u, l, b)| Branch::new(c, b).draft(u, l).into()),
        (content(), locale(), any::<u64>())
            .prop_map(|(c, l, b)| Branch::new(c, b).suggestion(l).into()),
        (prop::option::of(domain()), user_id())
            .prop_map(|(domain, user)| User { domain, user }.into()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_kind_round_trips(name in row_name()) {
        let text = name.to_string();
        let back: RowName = text.parse().map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(&back, &name);
        prop_assert_eq!(back.to_string(), text);
        prop_assert_eq!(back.kind(), name.kind());
    }

    #[test]
    fn canonical_urls_are_a_fixed_point(text in url_text()) {
        if let Ok(url) = ContentUrl::parse(&text) {
            let again = ContentUrl::parse(url.as_str()).unwrap();
            prop_assert_eq!(again.as_str(), url.as_str());
        }
    }

    #[test]
    fn parsing_never_panics_and_is_idempotent(s in "\\PC{0,80}") {
        if let Ok(n) = s.parse::<RowName>() {
            prop_assert_eq!(n.to_string().parse::<RowName>().unwrap(), n);
        }
    }

    #[test]
    fn parsing_near_misses_never_panics(
        name in row_name(),
        cut in any::<prop::sample::Index>(),
        removed in 0usize..12,
        junk in "[#/._a-zA-Z0-9%:]{0,3}",
        truncate in any::<bool>(),
    ) {
        // Cut a valid name, drop a few characters there, splice in a little
        // junk (or end it there): parse must answer, not panic, and whatever
        // it accepts must round-trip.
        let text = name.to_string();
        let floor = |mut at: usize| {
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            at
        };
        let at = floor(cut.index(text.len() + 1));
        let resume = floor((at + removed).min(text.len()));
        let mangled = if truncate {
            text[..at].to_owned()
        } else {
            format!("{}{junk}{}", &text[..at], &text[resume.max(at)..])
        };
        if let Ok(n) = mangled.parse::<RowName>() {
            prop_assert_eq!(n.to_string().parse::<RowName>().unwrap(), n);
        }
    }
}
