//! The parser against apimachinery's `labels.Parse`: every input below was run through
//! apimachinery v0.36.5 (cases from its `selector_test.go` and this crate's own), and the
//! expected canonical form or error message is what it printed.

use std::collections::{BTreeMap, BTreeSet};

use kube_core::{Expression, Selector};

use super::*;

/// Input, then apimachinery's canonical form (`Selector.String()`) or error message.
const CASES: &[(&str, Result<&str, &str>)] = &[
    ("x=a,y=b,z=c", Ok("x=a,y=b,z=c")),
    ("", Ok("")),
    ("x!=a,y=b", Ok("x!=a,y=b")),
    ("x=", Ok("x=")),
    ("x= ", Ok("x=")),
    ("x=,z= ", Ok("x=,z=")),
    ("x= ,z= ", Ok("x=,z=")),
    ("!x", Ok("!x")),
    ("x>1", Ok("x>1")),
    ("x>1,z<5", Ok("x>1,z<5")),
    (
        "x=a||y=b",
        Err(
            "unable to parse requirement: values[0][x]: Invalid value: \"a||y\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ),
    (
        "x==a==b",
        Err("found '==', expected: ',' or 'end of string'"),
    ),
    ("!x=a", Err("found '=', expected: ',' or 'end of string'")),
    (
        "x<a",
        Err(
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ),
    (
        "x>-1",
        Err(
            "unable to parse requirement: values[0][x]: Invalid value: \"-1\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ),
    (
        "x>+1",
        Err(
            "unable to parse requirement: values[0][x]: Invalid value: \"+1\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ),
    (
        "x>1a",
        Err(
            "unable to parse requirement: values[0]: Invalid value: \"1a\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ),
    (
        "x>",
        Err(
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ),
    (
        "x<",
        Err(
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ),
    (
        "x>(1)",
        Err("unable to parse requirement: found '(', expected: identifier"),
    ),
    (
        "x > 1 , y < -2",
        Err(
            "unable to parse requirement: values[0][y]: Invalid value: \"-2\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ),
    (
        "x in (1,2)>3",
        Err("found '>', expected: ',' or 'end of string'"),
    ),
    (
        "this-is-a-dns.domain.com/key-with-dash",
        Ok("this-is-a-dns.domain.com/key-with-dash"),
    ),
    (
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        Ok("this-is-another-dns.domain.com/key-with-dash in (so,what)"),
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        Ok("0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)"),
    ),
    ("foo  in\t (abc)", Ok("foo in (abc)")),
    ("x  notin\t(abc,def)", Ok("x notin (abc,def)")),
    ("x in (abc,def)", Ok("x in (abc,def)")),
    ("x in (abc,)", Ok("x in (,abc)")),
    ("x in (abc,abc)", Ok("x in (abc)")),
    ("x in ()", Ok("x in ()")),
    ("x in (a,,)", Ok("x in (,a)")),
    ("x in (a,,,)", Ok("x in (,a)")),
    ("x in (a,,,,,,)", Ok("x in (,a)")),
    ("x in (a,,a,,a,,a,,)", Ok("x in (,a)")),
    (
        "x notin (abc,,def),bar,z in (),w",
        Ok("bar,w,x notin (,abc,def),z in ()"),
    ),
    ("x,y in (a)", Ok("x,y in (a)")),
    ("x=a", Ok("x=a")),
    ("x<7", Ok("x<7")),
    ("x=a,y!=b", Ok("x=a,y!=b")),
    ("x=a,y!=b,z in (h,i,j)", Ok("x=a,y!=b,z in (h,i,j)")),
    ("x,,y", Err("found ',', expected: identifier after ','")),
    (
        ",x,y",
        Err("found ',', expected: !, identifier, or 'end of string'"),
    ),
    (
        "x nott in (y)",
        Err("unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt"),
    ),
    ("x notin ( )", Ok("x notin ()")),
    ("x notin (, a)", Ok("x notin (,a)")),
    (
        "a in (xyz),",
        Err("found '', expected: identifier after ','"),
    ),
    (
        "a in (xyz)b notin ()",
        Err("found 'b', expected: ',' or 'end of string'"),
    ),
    ("a ", Ok("a")),
    ("a in (x,y,notin, z,in)", Ok("a in (in,notin,x,y,z)")),
    (
        "a in (xyz abc)",
        Err("unable to parse requirement: found 'abc', expected: ',' or ')'"),
    ),
    (
        "a notin(",
        Err("unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ),
    (
        "a (",
        Err("unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
    ),
    (
        "(",
        Err("found '(', expected: !, identifier, or 'end of string'"),
    ),
    ("notin=in", Ok("notin=in")),
    ("in", Ok("in")),
    ("notin", Ok("notin")),
    ("in=x", Ok("in=x")),
    (
        "x in in",
        Err("unable to parse requirement: found 'in' expected: '('"),
    ),
    (
        "x in (in",
        Err("unable to parse requirement: found '', expected: ',' or ')'"),
    ),
    ("app=web,", Err("found '', expected: identifier after ','")),
    (
        ",app",
        Err("found ',', expected: !, identifier, or 'end of string'"),
    ),
    (
        "app in prod",
        Err("unable to parse requirement: found 'prod' expected: '('"),
    ),
    (
        "app in (a",
        Err("unable to parse requirement: found '', expected: ',' or ')'"),
    ),
    (
        "app notin",
        Err("unable to parse requirement: found '' expected: '('"),
    ),
    (
        "=web",
        Err("found '=', expected: !, identifier, or 'end of string'"),
    ),
    (
        "app=web=db",
        Err("found '=', expected: ',' or 'end of string'"),
    ),
    (
        "app=-bad-",
        Err(
            "unable to parse requirement: values[0][app]: Invalid value: \"-bad-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ),
    (
        "-app=web",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"-app\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
    ),
    (
        "Bad_Prefix/x=y",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"Bad_Prefix/x\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
    ),
    (
        "a b",
        Err("unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ),
    ("replicas>3", Ok("replicas>3")),
    (
        "!",
        Err("unable to parse requirement: found '', expected: identifier"),
    ),
    (
        "app=(x)",
        Err("unable to parse requirement: found '(', expected: identifier"),
    ),
    (
        "a/b/c",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
    ),
    (
        "/a",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty",
        ),
    ),
    (
        "a/",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"a/\": name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
    ),
    (
        "example.com/",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"example.com/\": name part must be non-empty; name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
    ),
    (
        "-bad.com/a",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"-bad.com/a\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
    ),
    (
        "a..b/c",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"a..b/c\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
    ),
    (
        "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234\": name part must be no more than 63 bytes",
        ),
    ),
    (
        "x=abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234",
        Err(
            "unable to parse requirement: values[0][x]: Invalid value: \"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234\": must be no more than 63 bytes",
        ),
    ),
    (
        "x=-abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij123",
        Err(
            "unable to parse requirement: values[0][x]: Invalid value: \"-abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij123\": must be no more than 63 bytes; a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ),
    (
        "x in (-a,-b)",
        Err(
            "unable to parse requirement: [values[0][x]: Invalid value: \"-a\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), values[1][x]: Invalid value: \"-b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]",
        ),
    ),
    (
        "x in (-a,b-)",
        Err(
            "unable to parse requirement: [values[0][x]: Invalid value: \"-a\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), values[1][x]: Invalid value: \"b-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]",
        ),
    ),
    (
        "x>-a",
        Err(
            "unable to parse requirement: [values[0]: Invalid value: \"-a\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][x]: Invalid value: \"-a\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]",
        ),
    ),
    (
        "x=a\"b",
        Err(
            "unable to parse requirement: values[0][x]: Invalid value: \"a\\\"b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
    ),
    (
        "a!==b",
        Err("unable to parse requirement: found '=', expected: identifier"),
    ),
    (
        "a==!b",
        Err("unable to parse requirement: found '!', expected: identifier"),
    ),
    (
        "!!a",
        Err("unable to parse requirement: found '!', expected: identifier"),
    ),
    ("!a,b", Ok("!a,b")),
    (
        "a,!b in (c)",
        Err("found 'in', expected: ',' or 'end of string'"),
    ),
    (
        "!a in (b)",
        Err("found 'in', expected: ',' or 'end of string'"),
    ),
    ("a=b)", Err("found ')', expected: ',' or 'end of string'")),
    (
        "a notin (b,c,",
        Err("unable to parse requirement: found '', expected: ',', or identifier"),
    ),
    (
        "a in (b c)",
        Err("unable to parse requirement: found 'c', expected: ',' or ')'"),
    ),
    ("x in (a),", Err("found '', expected: identifier after ','")),
    (
        "é=1",
        Err(
            "unable to parse requirement: <nil>: Invalid value: \"é\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
    ),
];

#[test]
fn parses_and_rejects_as_apimachinery_does_with_its_messages() {
    let mut wrong = Vec::new();
    for (input, want) in CASES {
        let got = parse_label_selector(input)
            .map(|s| s.to_string())
            .map_err(|e| e.to_string());
        let got = got.as_ref().map(String::as_str).map_err(String::as_str);
        if got != *want {
            wrong.push(format!("{input:?}: got {got:?}, want {want:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_error_names_the_selector_it_came_from() {
    let err = parse_label_selector("x>a").unwrap_err();
    assert_eq!(err.selector(), "x>a");
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Label pairs in a test table.
type Labels<'a> = &'a [(&'a str, &'a str)];

/// apimachinery's `TestSelectorMatches`, and this crate's earlier cases.
#[test]
fn matches_as_apimachinery_does() {
    let cases: &[(&str, Labels<'_>, bool)] = &[
        ("", &[("x", "y")], true),
        ("x=y", &[("x", "y")], true),
        ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
        ("x!=y,z!=w", &[("x", "z"), ("z", "a")], true),
        ("notin=in", &[("notin", "in")], true),
        ("x", &[("x", "z")], true),
        ("!x", &[("y", "z")], true),
        ("x>1", &[("x", "2")], true),
        ("x<1", &[("x", "0")], true),
        ("x<1", &[("x", "-1")], true),
        ("x=z", &[], false),
        ("x=y", &[("x", "z")], false),
        ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
        ("x!=y,z!=w", &[("x", "z"), ("z", "w")], false),
        ("x", &[("y", "z")], false),
        ("!x", &[("x", "z")], false),
        ("x>1", &[("x", "0")], false),
        ("x<1", &[("x", "2")], false),
        ("x>1", &[], false),
        ("x<1", &[], false),
        ("x>1", &[("x", "two")], false),
        ("x<1", &[("x", "")], false),
        (
            "foo=bar,foobar=bar,baz=blah",
            &[("foo", "bar"), ("baz", "blah")],
            false,
        ),
        ("env in (prod,dev)", &[("env", "prod")], true),
        ("env notin (prod)", &[("env", "prod")], false),
        ("missing notin (prod)", &[], true),
        ("missing in (prod)", &[], false),
        ("missing!=x", &[], true),
        ("app=", &[("app", "web")], false),
        ("app=", &[("app", "")], true),
        ("x in ()", &[("x", "")], true),
    ];
    for (selector, pairs, want) in cases {
        let parsed = parse_label_selector(selector).unwrap();
        assert_eq!(
            parsed.matches(&labels(pairs)),
            *want,
            "{selector} on {pairs:?}"
        );
    }
}

#[test]
fn empty_selector_selects_everything() {
    let selector = parse_label_selector(" \t").unwrap();
    assert!(selector.selects_all());
    assert!(selector.matches(&labels(&[("any", "thing")])));
    assert!(!parse_label_selector("a").unwrap().selects_all());
}

#[test]
fn a_kube_core_selector_converts_and_matches_the_same() {
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let selector: Selector = [
        Expression::Equal("a".into(), "1".into()),
        Expression::NotEqual("c".into(), "3".into()),
        Expression::In("d".into(), set(&["y", "x"])),
        Expression::NotIn("e".into(), set(&["z"])),
        Expression::Exists("f".into()),
        Expression::DoesNotExist("g".into()),
    ]
    .into_iter()
    .collect();
    let converted = LabelSelector::from(selector.clone());
    assert_eq!(
        converted.to_string(),
        "a=1,c!=3,d in (x,y),e notin (z),f,!g"
    );
    assert_eq!(
        converted,
        parse_label_selector("!g,f,e notin (z),d in (x,y),c!=3,a=1").unwrap()
    );
    let l = labels(&[("a", "1"), ("d", "x"), ("f", "")]);
    assert!(kube_core::SelectorExt::matches(&selector, &l));
    assert!(converted.matches(&l));
    let l = labels(&[("a", "1"), ("d", "x")]);
    assert!(!converted.matches(&l));
}
