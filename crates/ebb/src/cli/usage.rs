//! The answer to `help` and to an unknown command, as HAProxy 2.6 builds
//! it: the commands whose first words match the command's, or, past the
//! words that match, the few whose next words look most like the
//! command's (a fingerprint of each word's letter pairs), sorted by their
//! usage line, then `help`, `prompt` and `quit`.

/// A command as the usage message sees it: its words, its usage line
/// (`None`: never listed, its words still count as matching), and the
/// mode that shows it.
pub(crate) struct Keyword {
    pub(crate) words: &'static [&'static str],
    pub(crate) usage: Option<&'static str>,
    pub(crate) mode: Mode,
}

/// The session mode a command needs to be seen.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Any,
    Expert,
    Experimental,
}

/// The words of a command HAProxy compares (`CLI_PREFIX_KW_NB`).
const PREFIX_WORDS: usize = 5;
/// The most close matches proposed (`CLI_MAX_MATCHES`).
const MAX_MATCHES: usize = 5;

/// The three lines every usage message ends with.
const ALWAYS: &str = "  help [<command>]                        : list matching or all commands
  prompt                                  : toggle interactive mode with prompt
  quit                                    : disconnect
";

/// A word's fingerprint, added to `fp`: each letter class seen (a
/// letter, any digit, anything else) and each pair of classes that
/// follow each other, from the word's start to its end.
fn fingerprint(fp: &mut [u8; 1024], word: &str) {
    let class = |c: u8| match c.to_ascii_lowercase() {
        c @ b'a'..=b'z' => usize::from(c - b'a') + 1,
        b'0'..=b'9' => 27,
        _ => 28,
    };
    let mut from = 28;
    for &c in word.as_bytes() {
        let to = class(c);
        fp[to] = 1;
        fp[32 * from + to] = fp[32 * from + to].wrapping_add(1);
        from = to;
    }
    fp[32 * from + 28] = fp[32 * from + 28].wrapping_add(1);
}

fn distance(a: &[u8; 1024], b: &[u8; 1024]) -> u32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| u32::from(x.abs_diff(*y)))
        .sum()
}

/// How many of `kw`'s first words `args` has, up to `upto`.
fn matching(kw: &Keyword, args: &[&str], upto: usize) -> usize {
    kw.words
        .iter()
        .zip(args)
        .take(upto)
        .take_while(|(k, a)| !a.is_empty() && k == a)
        .count()
}

/// The usage message for `args` (a command's words, `help` first for
/// `help`), among `keywords` in HAProxy's order (it keeps the first of
/// matches as close), those of a mode left out unless the session is in
/// it (`expert`, `experimental`).
pub(crate) fn usage(
    keywords: &[Keyword],
    args: &[&str],
    expert: bool,
    experimental: bool,
) -> String {
    let shown = |k: &&Keyword| match k.mode {
        Mode::Any => true,
        Mode::Expert => expert,
        Mode::Experimental => experimental,
    };
    let keywords: Vec<&Keyword> = keywords.iter().filter(shown).collect();
    let (help, args) = match args {
        ["help", rest @ ..] => (true, rest),
        _ => (false, args),
    };
    let arg = |i: usize| args.get(i).copied().unwrap_or("");
    let length = keywords
        .iter()
        .map(|k| matching(k, args, PREFIX_WORDS))
        .max()
        .unwrap_or(0);
    let mut out = String::from(if help {
        "The following commands are valid at this level:\n"
    } else if length == 0 && arg(0).is_empty() {
        "Unknown command. Please enter one of the following commands only:\n"
    } else {
        "Unknown command, but maybe one of the following ones is a better match:\n"
    });
    // The closest (distance, command), best first, five at most.
    let mut best: Vec<(u32, &Keyword)> = Vec::new();
    if !arg(length).is_empty() {
        let mut theirs = [0u8; 1024];
        let mut totlen = 0;
        for w in args[length..]
            .iter()
            .take(PREFIX_WORDS.saturating_sub(length))
            .take_while(|w| !w.is_empty())
        {
            fingerprint(&mut theirs, w);
            totlen += w.len();
        }
        for &kw in &keywords {
            if kw.usage.is_none() || matching(kw, args, length) != length {
                continue;
            }
            let mut ours = [0u8; 1024];
            let mut len = totlen;
            for w in kw.words.iter().skip(length).take(PREFIX_WORDS - length) {
                fingerprint(&mut ours, w);
                len += w.len();
            }
            let dist = distance(&theirs, &ours);
            let worst = if best.len() < MAX_MATCHES {
                u32::MAX
            } else {
                best[MAX_MATCHES - 1].0
            };
            if (dist as usize) < 5 * len / 2 && dist < worst {
                // After those as close: the first found stays first.
                let at = best.partition_point(|(d, _)| *d <= dist);
                best.insert(at, (dist, kw));
                best.truncate(MAX_MATCHES);
            }
        }
    }
    let mut shown: Vec<&str> = match best.first() {
        Some(&(first, _)) => best
            .iter()
            .take_while(|(d, _)| *d <= 5 * first / 2)
            .filter_map(|(_, k)| k.usage)
            .collect(),
        None => keywords
            .iter()
            .filter(|k| matching(k, args, length) == length)
            .filter_map(|k| k.usage)
            .collect(),
    };
    shown.sort_unstable();
    for u in shown {
        out.push_str("  ");
        out.push_str(u);
        out.push('\n');
    }
    out.push_str(ALWAYS);
    out
}
