//! GitHub's filter patterns for branches, tags and paths ("Filter pattern
//! cheat sheet" of GitHub's workflow syntax), not a general glob: `?` and
//! `+` repeat the preceding character as in a regular expression, and a
//! list of patterns is read in order, a later `!pattern` excluding what an
//! earlier one included and a later positive pattern including it again.
//!
//! - `*`: zero or more characters, never `/`;
//! - `**`: zero or more of any character; `**/` also matches no directory
//!   at all (`**/README.md` matches `README.md`, as GitHub's examples say);
//! - `?`: zero or one of the preceding character (or class);
//! - `+`: one or more of the preceding character (or class);
//! - `[…]`: one character listed or in a range (`a-z`, `A-Z`, `0-9`);
//! - `!` first: the pattern excludes (elsewhere it is an ordinary character);
//! - `\`: the next character is taken literally.
//!
//! A pattern is compiled once (at store time, so a bad one is refused with
//! its reason) and matched in time linear in the name for each of its
//! parts, so a hostile pattern cannot make matching explode.

use std::fmt;

/// One compiled pattern of a filter list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    negated: bool,
    parts: Vec<Part>,
}

/// How many times a character (or class) is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeat {
    Once,
    /// `?`: zero or one.
    Optional,
    /// `+`: one or more.
    OneOrMore,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Char(char, Repeat),
    Class(Vec<(char, char)>, Repeat),
    /// `*`: any run of characters but `/`.
    Star,
    /// `**`: any run of characters.
    AnyPath,
    /// `**/`: nothing, or any run of characters ending with `/`.
    AnyDirectories,
}

/// Why a pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobError(pub String);

impl fmt::Display for GlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Pattern {
    /// Compiles a pattern as GitHub writes it.
    pub fn parse(text: &str) -> Result<Self, GlobError> {
        let (negated, body) = match text.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if body.is_empty() {
            return Err(GlobError(if negated {
                "`!` must be followed by the pattern it excludes".into()
            } else {
                "a pattern may not be empty".into()
            }));
        }
        let chars: Vec<char> = body.chars().collect();
        let mut parts: Vec<Part> = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '*' if chars.get(i + 1) == Some(&'*') => {
                    if chars.get(i + 2) == Some(&'/') {
                        parts.push(Part::AnyDirectories);
                        i += 3;
                    } else {
                        parts.push(Part::AnyPath);
                        i += 2;
                    }
                }
                '*' => {
                    parts.push(Part::Star);
                    i += 1;
                }
                '?' | '+' => {
                    let repeat = if c == '?' { Repeat::Optional } else { Repeat::OneOrMore };
                    match parts.last_mut() {
                        Some(Part::Char(_, slot @ Repeat::Once)) | Some(Part::Class(_, slot @ Repeat::Once)) => {
                            *slot = repeat;
                        }
                        _ => {
                            return Err(GlobError(format!(
                                "`{c}` at position {} repeats the character before it, and there is none it can repeat (write `\\{c}` for a literal `{c}`)",
                                i + 1 + usize::from(negated)
                            )))
                        }
                    }
                    i += 1;
                }
                '[' => {
                    let (class, next) = read_class(&chars, i, negated)?;
                    parts.push(Part::Class(class, Repeat::Once));
                    i = next;
                }
                '\\' => {
                    let Some(&escaped) = chars.get(i + 1) else {
                        return Err(GlobError(
                            "a pattern may not end with `\\`: it escapes the character after it".into(),
                        ));
                    };
                    parts.push(Part::Char(escaped, Repeat::Once));
                    i += 2;
                }
                _ => {
                    parts.push(Part::Char(c, Repeat::Once));
                    i += 1;
                }
            }
        }
        Ok(Self { text: text.to_string(), negated, parts })
    }

    /// The pattern as written (with its `!`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the pattern starts with `!` (it excludes what it matches).
    pub fn is_negated(&self) -> bool {
        self.negated
    }

    /// Whether the whole `name` matches the pattern (its `!` aside).
    pub fn matches(&self, name: &str) -> bool {
        let chars: Vec<char> = name.chars().collect();
        let n = chars.len();
        // reach[p]: the parts read so far can match exactly chars[..p].
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        for part in &self.parts {
            let mut next = vec![false; n + 1];
            match part {
                Part::Star => {
                    for p in 0..=n {
                        next[p] = reach[p] || (p > 0 && next[p - 1] && chars[p - 1] != '/');
                    }
                }
                Part::AnyPath => {
                    for p in 0..=n {
                        next[p] = reach[p] || (p > 0 && next[p - 1]);
                    }
                }
                Part::AnyDirectories => {
                    let mut started = false;
                    for p in 0..=n {
                        next[p] = reach[p] || (started && chars[p - 1] == '/');
                        started |= reach[p];
                    }
                }
                Part::Char(_, repeat) | Part::Class(_, repeat) => {
                    let fits = |c: char| part_fits(part, c);
                    for p in 0..=n {
                        let one = p > 0 && fits(chars[p - 1]);
                        next[p] = match repeat {
                            Repeat::Once => one && reach[p - 1],
                            Repeat::Optional => reach[p] || (one && reach[p - 1]),
                            Repeat::OneOrMore => one && (reach[p - 1] || next[p - 1]),
                        };
                    }
                }
            }
            reach = next;
            if !reach.iter().any(|&r| r) {
                return false;
            }
        }
        reach[n]
    }
}

fn part_fits(part: &Part, c: char) -> bool {
    match part {
        Part::Char(expected, _) => *expected == c,
        Part::Class(ranges, _) => ranges.iter().any(|&(low, high)| low <= c && c <= high),
        Part::Star | Part::AnyPath | Part::AnyDirectories => false,
    }
}

/// Reads `[…]` starting at `chars[start] == '['`; returns its ranges and
/// the index after `]`. GitHub documents letters and digits, and ranges
/// within `a-z`, `A-Z` or `0-9`; other characters listed are taken
/// literally, a range across those groups and a negated class (`[!…]`,
/// `[^…]`, which GitHub does not document) are refused rather than guessed.
fn read_class(chars: &[char], start: usize, negated: bool) -> Result<(Vec<(char, char)>, usize), GlobError> {
    let position = start + 1 + usize::from(negated);
    let mut ranges = Vec::new();
    let mut i = start + 1;
    if matches!(chars.get(i), Some('!') | Some('^')) {
        return Err(GlobError(format!(
            "`[` at position {position}: a negated class is not part of GitHub's filter patterns; list the characters wanted, or exclude with a `!pattern`"
        )));
    }
    loop {
        let Some(&c) = chars.get(i) else {
            return Err(GlobError(format!("`[` at position {position} is never closed by `]`")));
        };
        match c {
            ']' if ranges.is_empty() => {
                return Err(GlobError(format!("`[]` at position {position} lists no character")));
            }
            ']' => return Ok((ranges, i + 1)),
            _ => {
                let (low, after) = class_char(chars, i, position)?;
                if chars.get(after) == Some(&'-') && chars.get(after + 1).is_some_and(|&next| next != ']') {
                    let (high, end) = class_char(chars, after + 1, position)?;
                    if !same_range_group(low, high) || low > high {
                        return Err(GlobError(format!(
                            "`[{low}-{high}]` at position {position}: a range goes upwards within `a-z`, `A-Z` or `0-9`"
                        )));
                    }
                    ranges.push((low, high));
                    i = end;
                } else {
                    ranges.push((low, low));
                    i = after;
                }
            }
        }
    }
}

fn class_char(chars: &[char], i: usize, position: usize) -> Result<(char, usize), GlobError> {
    match chars.get(i) {
        Some('\\') => match chars.get(i + 1) {
            Some(&c) => Ok((c, i + 2)),
            None => Err(GlobError(format!("`[` at position {position} is never closed by `]`"))),
        },
        Some('/') => Err(GlobError(format!("`[` at position {position}: a class cannot match `/`"))),
        Some(&c) => Ok((c, i + 1)),
        None => Err(GlobError(format!("`[` at position {position} is never closed by `]`"))),
    }
}

fn same_range_group(low: char, high: char) -> bool {
    (low.is_ascii_lowercase() && high.is_ascii_lowercase())
        || (low.is_ascii_uppercase() && high.is_ascii_uppercase())
        || (low.is_ascii_digit() && high.is_ascii_digit())
}

/// A filter's patterns, read in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternList {
    patterns: Vec<Pattern>,
}

impl PatternList {
    /// A list of compiled patterns, in the order written.
    pub fn new(patterns: Vec<Pattern>) -> Self {
        Self { patterns }
    }

    /// The patterns, in order.
    pub fn patterns(&self) -> &[Pattern] {
        &self.patterns
    }

    /// The last pattern that matches `name`, which decides it: the name is
    /// in the list when that pattern is positive, out of it when negated or
    /// when none matches.
    pub fn deciding(&self, name: &str) -> Option<&Pattern> {
        self.patterns.iter().rev().find(|pattern| pattern.matches(name))
    }

    /// Whether `name` is in the list (GitHub's ordered evaluation).
    pub fn includes(&self, name: &str) -> bool {
        self.deciding(name).is_some_and(|pattern| !pattern.is_negated())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(patterns: &[&str]) -> PatternList {
        PatternList::new(patterns.iter().map(|p| Pattern::parse(p).unwrap()).collect())
    }

    /// Every example of GitHub's "Filter pattern cheat sheet", both tables:
    /// the patterns (one list, in order), the names they match, and the
    /// names the sheet says they do not match or that plainly fall outside.
    /// Each row of GitHub's cheat sheet: its patterns, names they match,
    /// names they do not.
    type CheatSheet<'a> = &'a [(&'a [&'a str], &'a [&'a str], &'a [&'a str])];

    #[track_caller]
    fn assert_cheat_sheet(table: CheatSheet) {
        for (patterns, matching, other) in table {
            let list = list(patterns);
            for name in *matching {
                assert!(list.includes(name), "{patterns:?} should match {name}");
            }
            for name in *other {
                assert!(!list.includes(name), "{patterns:?} should not match {name}");
            }
        }
    }

    #[test]
    fn github_cheat_sheet_branches_and_tags() {
        let table: CheatSheet = &[
            (&["feature/*"], &["feature/my-branch", "feature/your-branch"], &["feature/beta-a/my-branch", "feature"]),
            (
                &["feature/**"],
                &["feature/beta-a/my-branch", "feature/your-branch", "feature/mona/the/octocat"],
                &["feature", "features/x"],
            ),
            (&["main", "releases/mona-the-octocat"], &["main", "releases/mona-the-octocat"], &["main2", "releases"]),
            (&["*"], &["main", "releases"], &["all/the/branches", "releases/v1"]),
            (&["**"], &["all/the/branches", "every/tag", "main"], &[]),
            (&["*feature"], &["mona-feature", "feature", "ver-10-feature"], &["feature-x", "a/feature"]),
            (&["v2*"], &["v2", "v2.0", "v2.9"], &["v1", "v2/x", "xv2"]),
            (&["v[12].[0-9]+.[0-9]+"], &["v1.10.1", "v2.0.0"], &["v3.0.0", "v1.0", "v1.a.0", "v1..0"]),
        ];
        assert_cheat_sheet(table);
    }

    #[test]
    fn github_cheat_sheet_paths() {
        let table: CheatSheet = &[
            (&["*"], &["README.md", "server.rb"], &["docs/README.md"]),
            (&["*.jsx?"], &["page.js", "page.jsx"], &["page.jsxx", "page.j", "src/page.js"]),
            (&["**"], &["all/the/files.md"], &[]),
            (&["*.js"], &["app.js", "index.js"], &["js/index.js", "app.jsx"]),
            (&["**.js"], &["index.js", "js/index.js", "src/js/app.js"], &["index.ts"]),
            (&["docs/*"], &["docs/README.md", "docs/file.txt"], &["docs/mona/octocat.txt", "README.md"]),
            (&["docs/**"], &["docs/README.md", "docs/mona/octocat.txt"], &["README.md", "src/docs/x"]),
            (
                &["docs/**/*.md"],
                &["docs/README.md", "docs/mona/hello-world.md", "docs/a/markdown/file.md"],
                &["docs/a.txt", "README.md"],
            ),
            (
                &["**/docs/**"],
                &["docs/hello.md", "dir/docs/my-file.txt", "space/docs/plan/space.doc"],
                &["docs", "mydocs/x", "dir/docs"],
            ),
            (&["**/README.md"], &["README.md", "js/README.md"], &["README.mdx", "js/NOTREADME.md"]),
            (&["**/*src/**"], &["a/src/app.js", "my-src/code/js/app.js"], &["src", "a/source/app.js"]),
            (&["**/*-post.md"], &["my-post.md", "path/their-post.md"], &["post.md", "path/post.md"]),
            (
                &["**/migrate-*.sql"],
                &["migrate-10909.sql", "db/migrate-v1.0.sql", "db/sept/migrate-v1.sql"],
                &["db/migrate.sql", "migrate-1.sqlite"],
            ),
            (&["*.md", "!README.md"], &["hello.md"], &["README.md", "docs/hello.md"]),
            (&["*.md", "!README.md", "README*"], &["hello.md", "README.md", "README.doc"], &["docs/hello.md"]),
        ];
        assert_cheat_sheet(table);
    }

    #[test]
    fn the_docs_ordered_negation_examples() {
        // "runs on releases/10 or releases/beta/mona, but not on
        // releases/10-alpha or releases/beta/3-alpha"
        let list = list(&["releases/**", "!releases/**-alpha"]);
        assert!(list.includes("releases/10"));
        assert!(list.includes("releases/beta/mona"));
        assert!(!list.includes("releases/10-alpha"));
        assert!(!list.includes("releases/beta/3-alpha"));
        let paths = super::PatternList::new(vec![
            Pattern::parse("sub-project/**").unwrap(),
            Pattern::parse("!sub-project/docs/**").unwrap(),
        ]);
        assert!(paths.includes("sub-project/index.js"));
        assert!(paths.includes("sub-project/src/index.js"));
        assert!(!paths.includes("sub-project/docs/readme.md"));
        assert_eq!(paths.deciding("sub-project/docs/readme.md").map(Pattern::text), Some("!sub-project/docs/**"));
    }

    #[test]
    fn question_mark_and_plus_repeat_the_preceding_character() {
        let pattern = Pattern::parse("Octoc?t").unwrap();
        assert!(pattern.matches("Octoct") && pattern.matches("Octot"));
        assert!(!pattern.matches("Octocct"));
        assert!(!pattern.matches("Octocat"), "`?` is not one any character");
        let plus = Pattern::parse("ab+c").unwrap();
        assert!(plus.matches("abc") && plus.matches("abbbc"));
        assert!(!plus.matches("ac"));
        let class_plus = Pattern::parse("[0-9]+").unwrap();
        assert!(class_plus.matches("2024") && !class_plus.matches("") && !class_plus.matches("12a"));
    }

    #[test]
    fn classes_list_characters_and_ranges() {
        let pattern = Pattern::parse("[CB]at").unwrap();
        assert!(pattern.matches("Cat") && pattern.matches("Bat") && !pattern.matches("Hat"));
        let range = Pattern::parse("[1-2]00").unwrap();
        assert!(range.matches("100") && range.matches("200") && !range.matches("300"));
        let mixed = Pattern::parse("[0-9a-z]").unwrap();
        assert!(mixed.matches("7") && mixed.matches("q") && !mixed.matches("Q"));
        let literal = Pattern::parse("v1[._-]x").unwrap();
        assert!(
            literal.matches("v1.x") && literal.matches("v1_x") && literal.matches("v1-x") && !literal.matches("v1/x")
        );
    }

    #[test]
    fn a_backslash_escapes_special_characters() {
        let pattern = Pattern::parse(r"release\+hotfix\*").unwrap();
        assert!(pattern.matches("release+hotfix*"));
        assert!(!pattern.matches("releaseehotfix"));
        let bang = Pattern::parse(r"\!important").unwrap();
        assert!(!bang.is_negated() && bang.matches("!important"));
        assert!(Pattern::parse(r"a\[b\]").unwrap().matches("a[b]"));
    }

    #[test]
    fn bang_is_special_only_first() {
        let pattern = Pattern::parse("wow!").unwrap();
        assert!(!pattern.is_negated() && pattern.matches("wow!"));
    }

    #[test]
    fn special_characters_of_regular_expressions_are_literal() {
        let pattern = Pattern::parse("v1.(x)|{y}$^").unwrap();
        assert!(pattern.matches("v1.(x)|{y}$^"));
        assert!(!Pattern::parse("v1.0").unwrap().matches("v1x0"), "`.` is a dot, not any character");
    }

    #[test]
    fn bad_patterns_are_refused_with_a_reason() {
        for (pattern, says) in [
            ("", "empty"),
            ("!", "followed by"),
            ("?abc", "none it can repeat"),
            ("a*+", "none it can repeat"),
            ("a??", "none it can repeat"),
            ("[abc", "never closed"),
            ("[]", "no character"),
            ("[!a]", "negated class"),
            ("[a-Z]", "range"),
            ("[9-0]", "range"),
            ("a\\", "end with"),
        ] {
            let err = Pattern::parse(pattern).unwrap_err();
            assert!(err.0.contains(says), "{pattern}: {err}");
        }
    }

    #[test]
    fn a_hostile_pattern_matches_quickly() {
        let pattern = Pattern::parse(&"*a".repeat(200)).unwrap();
        let name = "a".repeat(2000) + "b";
        assert!(!pattern.matches(&name));
    }

    #[test]
    fn an_empty_list_includes_nothing_and_a_negative_alone_excludes() {
        assert!(!list(&[]).includes("main"));
        assert!(!list(&["!main"]).includes("main"));
        assert!(!list(&["!main"]).includes("dev"));
    }
}
