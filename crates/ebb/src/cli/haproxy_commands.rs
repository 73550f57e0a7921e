//! HAProxy 2.6's commands on a worker's CLI (its processes' own, not the
//! master's), as its usage message knows them: their words, their usage
//! line, the mode that shows them, in HAProxy's order (the order it
//! registers them, which keeps the first of matches as close). Data for
//! [`super::usage`]: ebb answers an unknown command with HAProxy's
//! message, byte for byte.

use super::usage::{Keyword, Mode};

pub(crate) const WORKER_KEYWORDS: &[Keyword] = &[
    Keyword {
        words: &["show", "tls-keys"],
        usage: Some("show tls-keys [id|*]                    : show tls keys references or dump tls ticket keys when id specified"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "ssl", "tls-key"],
        usage: Some("set ssl tls-key [id|file] <key>         : set the next TLS key for the <id> or <file> listener to <key>"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "ssl", "ocsp-response"],
        usage: Some("set ssl ocsp-response <resp|payload>    : update a certificate's OCSP Response from a base64-encode DER"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "ssl", "ocsp-response"],
        usage: Some("show ssl ocsp-response [id]             : display the IDs of the OCSP responses used in memory, or the details of a single OCSP response"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "ssl", "providers"],
        usage: Some("show ssl providers                      : show loaded SSL providers"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["add", "ssl", "crt-list"],
        usage: Some("add ssl crt-list <list> <cert> [opts]*  : add to crt-list file <list> a line <cert> or a payload"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["del", "ssl", "crt-list"],
        usage: Some("del ssl crt-list <list> <cert[:line]>   : delete a line <cert> from crt-list file <list>"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "ssl", "crt-list"],
        usage: Some("show ssl crt-list [-n] [<list>]         : show the list of crt-lists or the content of a crt-list file <list>"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["new", "ssl", "cert"],
        usage: Some("new ssl cert <certfile>                 : create a new certificate file to be used in a crt-list or a directory"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "ssl", "cert"],
        usage: Some("set ssl cert <certfile> <payload>       : replace a certificate file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["commit", "ssl", "cert"],
        usage: Some("commit ssl cert <certfile>              : commit a certificate file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["abort", "ssl", "cert"],
        usage: Some("abort ssl cert <certfile>               : abort a transaction for a certificate file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["del", "ssl", "cert"],
        usage: Some("del ssl cert <certfile>                 : delete an unused certificate file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "ssl", "cert"],
        usage: Some("show ssl cert [<certfile>]              : display the SSL certificates used in memory, or the details of a file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["new", "ssl", "ca-file"],
        usage: Some("new ssl ca-file <cafile>                : create a new CA file to be used in a crt-list"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "ssl", "ca-file"],
        usage: Some("set ssl ca-file <cafile> <payload>      : replace a CA file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["commit", "ssl", "ca-file"],
        usage: Some("commit ssl ca-file <cafile>             : commit a CA file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["abort", "ssl", "ca-file"],
        usage: Some("abort ssl ca-file <cafile>              : abort a transaction for a CA file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["del", "ssl", "ca-file"],
        usage: Some("del ssl ca-file <cafile>                : delete an unused CA file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "ssl", "ca-file"],
        usage: Some("show ssl ca-file [<cafile>[:<index>]]   : display the SSL CA files used in memory, or the details of a <cafile>, or a single certificate of index <index> of a CA file <cafile>"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["new", "ssl", "crl-file"],
        usage: Some("new ssl crlfile <crlfile>               : create a new CRL file to be used in a crt-list"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "ssl", "crl-file"],
        usage: Some("set ssl crl-file <crlfile> <payload>    : replace a CRL file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["commit", "ssl", "crl-file"],
        usage: Some("commit ssl crl-file <crlfile>           : commit a CRL file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["abort", "ssl", "crl-file"],
        usage: Some("abort ssl crl-file <crlfile>            : abort a transaction for a CRL file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["del", "ssl", "crl-file"],
        usage: Some("del ssl crl-file <crlfile>              : delete an unused CRL file"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "ssl", "crl-file"],
        usage: Some("show ssl crl-file [<crlfile[:<index>>]] : display the SSL CRL files used in memory, or the details of a <crlfile>, or a single CRL of index <index> of CRL file <crlfile>"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "sess"],
        usage: Some("show sess [id]                          : report the list of current sessions or dump this exact session"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["shutdown", "session"],
        usage: Some("shutdown session [id]                   : kill a specific session"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["shutdown", "sessions", "server"],
        usage: Some("shutdown sessions server <bk>/<srv>     : kill sessions on a server"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["clear", "counters"],
        usage: Some("clear counters [all]                    : clear max statistics counters (or all counters)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "info"],
        usage: Some("show info [desc|json|typed|float]*      : report information about the running process"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "stat"],
        usage: Some("show stat [desc|json|no-maint|typed|up]*: report counters for each proxy and server"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "schema", "json"],
        usage: Some("show schema json                        : report schema used for stats"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["disable", "agent"],
        usage: Some("disable agent                           : disable agent checks"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["disable", "health"],
        usage: Some("disable health                          : disable health checks"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["disable", "server"],
        usage: Some("disable server (DEPRECATED)             : disable a server for maintenance (use 'set server' instead)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["enable", "agent"],
        usage: Some("enable agent                            : enable agent checks"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["enable", "health"],
        usage: Some("enable health                           : enable health checks"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["enable", "server"],
        usage: Some("enable server  (DEPRECATED)             : enable a disabled server (use 'set server' instead)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "maxconn", "server"],
        usage: Some("set maxconn server <bk>/<srv>           : change a server's maxconn setting"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "server"],
        usage: Some("set server <bk>/<srv> [opts]            : change a server's state, weight, address or ssl"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["get", "weight"],
        usage: Some("get weight <bk>/<srv>                   : report a server's current weight"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "weight"],
        usage: Some("set weight <bk>/<srv>  (DEPRECATED)     : change a server's weight (use 'set server' instead)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["add", "server"],
        usage: Some("add server <bk>/<srv>                   : create a new server"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["del", "server"],
        usage: Some("del server <bk>/<srv>                   : remove a dynamically added server"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["clear", "table"],
        usage: Some("clear table <table> [<filter>]*         : remove an entry from a table (filter: data/key)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "table"],
        usage: Some("set table <table> key <k> [data.* <v>]* : update or create a table entry's data"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "table"],
        usage: Some("show table <table> [<filter>]*          : report table usage stats or dump this table's contents (filter: data/key)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "peers"],
        usage: Some("show peers [dict|-] [section]           : dump some information about all the peers or this peers section"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "resolvers"],
        usage: Some("show resolvers [id]                     : dumps counters from all resolvers section and associated name servers"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["help"],
        usage: None,
        mode: Mode::Any,
    },
    Keyword {
        words: &["prompt"],
        usage: None,
        mode: Mode::Any,
    },
    Keyword {
        words: &["quit"],
        usage: None,
        mode: Mode::Any,
    },
    Keyword {
        words: &["_getsocks"],
        usage: None,
        mode: Mode::Any,
    },
    Keyword {
        words: &["expert-mode"],
        usage: None,
        mode: Mode::Any,
    },
    Keyword {
        words: &["experimental-mode"],
        usage: None,
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "maxconn", "global"],
        usage: Some("set maxconn global <value>              : change the per-process maxconn setting"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "rate-limit"],
        usage: Some("set rate-limit <setting> <value>        : change a rate limiting value"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "severity-output"],
        usage: Some("set severity-output [none|number|string]: set presence of severity level in feedback information"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "timeout"],
        usage: Some("set timeout [cli] <delay>               : change a timeout setting"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "env"],
        usage: Some("show env [var]                          : dump environment variables known to the process"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "cli", "sockets"],
        usage: Some("show cli sockets                        : dump list of cli sockets"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "cli", "level"],
        usage: Some("show cli level                          : display the level of the current CLI session"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "fd"],
        usage: Some("show fd [num]                           : dump list of file descriptors in use or a specific one"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "activity"],
        usage: Some("show activity                           : show per-thread activity stats (for support/developers)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "version"],
        usage: Some("show version                            : show version of the current process"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["operator"],
        usage: Some("operator                                : lower the level of the current CLI session to operator"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["user"],
        usage: Some("user                                    : lower the level of the current CLI session to user"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["disable", "frontend"],
        usage: Some("disable frontend <frontend>             : temporarily disable specific frontend"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["enable", "frontend"],
        usage: Some("enable frontend <frontend>              : re-enable specific frontend"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "maxconn", "frontend"],
        usage: Some("set maxconn frontend <frontend> <value> : change a frontend's maxconn setting"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "servers", "conn"],
        usage: Some("show servers conn [<backend>]           : dump server connections status (all or for a single backend)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "servers", "state"],
        usage: Some("show servers state [<backend>]          : dump volatile server information (all or for a single backend)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "backend"],
        usage: Some("show backend                            : list backends in the current running config"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["shutdown", "frontend"],
        usage: Some("shutdown frontend <frontend>            : stop a specific frontend"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "dynamic-cookie-key", "backend"],
        usage: Some("set dynamic-cookie-key backend <bk> <k> : change a backend secret key for dynamic cookies"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["enable", "dynamic-cookie", "backend"],
        usage: Some("enable dynamic-cookie backend <bk>      : enable dynamic cookies on a specific backend"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["disable", "dynamic-cookie", "backend"],
        usage: Some("disable dynamic-cookie backend <bk>     : disable dynamic cookies on a specific backend"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "errors"],
        usage: Some("show errors [<px>] [request|response]   : report last request and/or response errors for each proxy"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "cache"],
        usage: Some("show cache                              : show cache status"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["httpclient"],
        usage: Some("httpclient <method> <URI>               : launch an HTTP request"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["get", "var"],
        usage: Some("get var <name>                          : retrieve contents of a process-wide variable"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "var"],
        usage: Some("set var <name> [fmt|expr] {<fmt>|<expr>}: set variable from an expression or a format"),
        mode: Mode::Experimental,
    },
    Keyword {
        words: &["debug", "dev", "bug"],
        usage: Some("debug dev bug                           : call BUG_ON() and crash"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "check"],
        usage: Some("debug dev check                         : call CHECK_IF() and possibly crash"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "close"],
        usage: Some("debug dev close  <fd>                   : close this file descriptor"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "delay"],
        usage: Some("debug dev delay  [ms]                   : sleep this long"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "fd"],
        usage: Some("debug dev fd                            : scan for rogue/unhandled FDs"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "exit"],
        usage: Some("debug dev exit   [code]                 : immediately exit the process"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "hex"],
        usage: Some("debug dev hex    <addr> [len]           : dump a memory area"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "log"],
        usage: Some("debug dev log    [msg] ...              : send this msg to global logs"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "loop"],
        usage: Some("debug dev loop   [ms]                   : loop this long"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "panic"],
        usage: Some("debug dev panic                         : immediately trigger a panic"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "sched"],
        usage: Some("debug dev sched  {task|tasklet} [k=v]*  : stress the scheduler"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "stream"],
        usage: Some("debug dev stream [k=v]*                 : show/manipulate stream flags"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "sym"],
        usage: Some("debug dev sym    <addr>                 : resolve symbol address"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "tkill"],
        usage: Some("debug dev tkill  [thr] [sig]            : send signal to thread"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "warn"],
        usage: Some("debug dev warn                          : call WARN_ON() and possibly crash"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["debug", "dev", "write"],
        usage: Some("debug dev write  [size]                 : write that many bytes in return"),
        mode: Mode::Expert,
    },
    Keyword {
        words: &["show", "libs"],
        usage: Some("show libs                               : show loaded object files and libraries"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "threads"],
        usage: Some("show threads                            : show some threads debugging information"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "events"],
        usage: Some("show events [<sink>] [-w] [-n]          : show event sink state"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["add", "acl"],
        usage: Some("add acl [@<ver>] <acl> <pattern>        : add an acl entry"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["clear", "acl"],
        usage: Some("clear acl [@<ver>] <acl>                : clear the contents of this acl"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["commit", "acl"],
        usage: Some("commit acl @<ver> <acl>                 : commit the ACL at this version"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["del", "acl"],
        usage: Some("del acl <acl> [<key>|#<ref>]            : delete acl entries matching <key>"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["get", "acl"],
        usage: Some("get acl <acl> <value>                   : report the patterns matching a sample for an ACL"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["prepare", "acl"],
        usage: Some("prepare acl <acl>                       : prepare a new version for atomic ACL replacement"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "acl"],
        usage: Some("show acl [@<ver>] <acl>]                : report available acls or dump an acl's contents"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["add", "map"],
        usage: Some("add map [@<ver>] <map> <key> <val>      : add a map entry (payload supported instead of key/val)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["clear", "map"],
        usage: Some("clear map [@<ver>] <map>                : clear the contents of this map"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["commit", "map"],
        usage: Some("commit map @<ver> <map>                 : commit the map at this version"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["del", "map"],
        usage: Some("del map <map> [<key>|#<ref>]            : delete map entries matching <key>"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["get", "map"],
        usage: Some("get map <acl> <value>                   : report the keys and values matching a sample for a map"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["prepare", "map"],
        usage: Some("prepare map <acl>                       : prepare a new version for atomic map replacement"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "map"],
        usage: Some("set map <map> [<key>|#<ref>] <value>    : modify a map entry"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "map"],
        usage: Some("show map [@ver] [map]                   : report available maps or dump a map's contents"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "pools"],
        usage: Some("show pools                              : report information about the memory pools usage"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["trace"],
        usage: Some("trace [<module>|0] [cmd [args...]]      : manage live tracing (empty to list, 0 to stop all)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "trace"],
        usage: Some("show trace [<module>]                   : show live tracing state"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["set", "profiling"],
        usage: Some("set profiling <what> {auto|on|off}      : enable/disable resource profiling (tasks,memory)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "profiling"],
        usage: Some("show profiling [<what>|<#lines>|byaddr]*: show profiling state (all,status,tasks,memory)"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "tasks"],
        usage: Some("show tasks                              : show running tasks"),
        mode: Mode::Any,
    },
    Keyword {
        words: &["show", "startup-logs"],
        usage: Some("show startup-logs                       : report logs emitted during HAProxy startup"),
        mode: Mode::Any,
    },
];
