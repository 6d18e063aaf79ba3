# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_ketama_global_optspecs
    string join \n h/help V/version
end

function __fish_ketama_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_ketama_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_ketama_using_subcommand
    set -l cmd (__fish_ketama_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c ketama -n "__fish_ketama_needs_command" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_needs_command" -s V -l version -d 'Print version'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "route" -d 'Route keys read from stdin (one per line) to servers; with a key (--key-config, --key-template, ...), requests, each routed by what the key takes of it as the router takes it (`*`: the key took nothing, and the router sends it round robin)'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "bench" -d 'Build and query the same ring with each ketama layout and with pingora-ketama v1 and v2; print a markdown table of medians'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "analyze" -d 'Per-server and overall balance of a ring: exact shares, collisions, predicted and measured CV, memory per layout'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "sweep" -d 'Predicted and measured CV over a range of points per server (CSV, optional SVG chart)'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "recommend" -d 'The smallest point multiple that meets a balance target'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "diff" -d 'The exact share of keys whose server changes between two rings; with a key (and --to-key-config), the share of the requests of --keys whose server changes when the ring and the key change'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "migrate-plan" -d 'For each rollout step (basis points), the expected share of keys whose server changes against the old ring'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "simulate" -d 'Replay a workload with bounded loads at several balance factors: max load / average, own-node share, spills, moved keys'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "fleet" -d 'Steer a fleet of ketama-routers through etcd: push the routing config, set the rollout, see what every router applied'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "import" -d 'Write a ketama servers file from another proxy\'s configuration (HAProxy\'s `server` lines)'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "generate" -d 'Write the man pages or shell completions (for packagers)'
complete -c ketama -n "__fish_ketama_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ketama -n "__fish_ketama_using_subcommand route" -l servers -d 'Servers file: one `SERVER [WEIGHT] [key=value ...] [down]` per line' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand route" -l compat -d 'Hashing scheme: nginx, pingora-v1, pingora-v2, libmemcached, twemproxy (see --key-hash), haproxy (HAProxy\'s `hash-type consistent`: sdbm with avalanche; haproxy:FUNCTION[+avalanche] for sdbm, djb2, wt6 or crc32), envoy-ring-hash (Envoy\'s and gRPC\'s ring_hash; envoy-ring-hash:min=N,max=N[,murmur2], or :grpc for gRPC\'s sizes) or maglev (Envoy\'s; maglev:PRIME for the table size)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l key-hash -d 'twemproxy\'s key hash: md5, fnv1a_64 (twemproxy\'s default), fnv1a_32, fnv1_64, fnv1_32, crc16, crc32, crc32a, one_at_a_time, hsieh, murmur or jenkins' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l layout -d 'Storage layout: wide, packed or compact (routing is the same in every layout)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l point-multiple -d 'Points per weight unit (at least 1; the memcached schemes take only their own 160, haproxy only its 16, which the default stands for)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l replicas -d 'Print up to R distinct servers per key, in failover order (at least 1)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l require -d 'Route only to servers carrying all these labels (comma-separated)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l to -d 'Servers file of a new ring to migrate to; prints `SERVER<TAB>old|new`' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand route" -l to-compat -d 'Scheme of the new ring: nginx, pingora-v1, pingora-v2, libmemcached, twemproxy, haproxy, envoy-ring-hash or maglev (as --compat)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l to-key-hash -d 'twemproxy key hash of the new ring (as --key-hash)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l to-layout -d 'Layout of the new ring: wide, packed or compact' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l to-point-multiple -d 'Point multiple of the new ring (at least 1)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l rollout -d 'Share of keys routed by the new ring, in basis points (0 to 10000)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l scope-rollout -d 'A scope\'s own rollout, NAME=BP; repeatable' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l scope -d 'The scope (data center) this routing runs in' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l key-config -d 'Take each request\'s key as a router with this file\'s `[key]` does (a router\'s config file, or one holding only `[key]`); the input lines are then requests (see --request-format)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand route" -l key-template -d '`[key] template`: nginx\'s `hash <template>` (e.g. \'$host$request_uri\', \'$cookie_sid\')' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l key-balance -d '`[key] balance`: HAProxy\'s balance line (e.g. \'url_param id\', \'hdr(host) use_domain_only\')' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l drop-query -d '`[key.normalize] drop_query`: leave this parameter out (repeatable)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l keep-query -d '`[key.normalize] keep_query`: keep only this parameter (repeatable)' -r
complete -c ketama -n "__fish_ketama_using_subcommand route" -l to-key-config -d 'A migration\'s new side\'s `[key]` (a router\'s config file, or one holding only `[key]`): each side routes its own key, the side chosen by the new key, as the router does with `[migration.key]`; the old side keeps the key above (by default the router\'s, `$request_uri`)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand route" -l request-format -d 'How the input lines say a request, when a key is given: `target` (the request target as sent, origin-form `/a?b` or absolute-form `http://host/a?b`) or `access-log` (the router\'s JSON access log, whose lines carry the fields a configured key reads)' -r -f -a "target\t'A request target as sent'
access-log\t'A line of the router\'s JSON access log'"
complete -c ketama -n "__fish_ketama_using_subcommand route" -l require-from-input -d 'Read `KEY<TAB>LABELS` lines (split at the last tab; no tab or empty LABELS means no requirement)'
complete -c ketama -n "__fish_ketama_using_subcommand route" -l sort-query -d '`[key.normalize] sort_query`: sort the query\'s parameters'
complete -c ketama -n "__fish_ketama_using_subcommand route" -l lowercase-host -d '`[key.normalize] lowercase_host`'
complete -c ketama -n "__fish_ketama_using_subcommand route" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l nodes -d 'Nodes on the ring (named 10.A.B.C:443)' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l weight -d 'Weight of every node' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l point-multiple -d 'Points per weight unit' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l keys -d 'Lookups per measurement (30-byte keys)' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l rounds -d 'Rounds; every implementation runs once per round, interleaved, and the table reports medians' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l compat -d 'ketama\'s scheme (pingora rows always use their own): nginx, pingora-v1, pingora-v2, libmemcached, twemproxy, haproxy, envoy-ring-hash or maglev (as `ketama route --compat`)' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l key-hash -d 'twemproxy\'s key hash (as in `ketama route --key-hash`)' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l subsets -d 'Instead: F labels (each node carries each with probability 1/2), one ketama ring serving all 2^F label combinations against 2^F pingora-ketama v2 rings; memory and ns per lookup' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l layout -d 'ketama\'s layout for --subsets and --balance' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l balance -d 'Instead: the bounded-loads decision at this balance factor (percent, 100 to 1000) against the plain decision and a pingora-ketama v2 lookup, on one thread and on two sharing the counters' -r
complete -c ketama -n "__fish_ketama_using_subcommand bench" -l json -d 'Print one JSON object instead of the markdown table'
complete -c ketama -n "__fish_ketama_using_subcommand bench" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l servers -d 'Servers file' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l compat -d 'Hashing scheme: nginx, pingora-v1, pingora-v2, libmemcached, twemproxy (see --key-hash), haproxy (HAProxy\'s `hash-type consistent`: sdbm with avalanche; haproxy:FUNCTION[+avalanche] for sdbm, djb2, wt6 or crc32), envoy-ring-hash (Envoy\'s and gRPC\'s ring_hash; envoy-ring-hash:min=N,max=N[,murmur2], or :grpc for gRPC\'s sizes) or maglev (Envoy\'s; maglev:PRIME for the table size)' -r
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l key-hash -d 'twemproxy\'s key hash: md5, fnv1a_64 (twemproxy\'s default), fnv1a_32, fnv1_64, fnv1_32, crc16, crc32, crc32a, one_at_a_time, hsieh, murmur or jenkins' -r
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l layout -d 'Storage layout: wide, packed or compact (routing is the same in every layout)' -r
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l point-multiple -d 'Points per weight unit (at least 1; the memcached schemes take only their own 160, haproxy only its 16, which the default stands for)' -r
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l keys -d 'Measure each server\'s share of these requests too (one a line: a target, or with --request-format access-log the router\'s JSON access log), routed by the key (the key options; by default the router\'s, `$request_uri`)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l key-config -d 'Take each request\'s key as a router with this file\'s `[key]` does (a router\'s config file, or one holding only `[key]`); the input lines are then requests (see --request-format)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l key-template -d '`[key] template`: nginx\'s `hash <template>` (e.g. \'$host$request_uri\', \'$cookie_sid\')' -r
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l key-balance -d '`[key] balance`: HAProxy\'s balance line (e.g. \'url_param id\', \'hdr(host) use_domain_only\')' -r
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l drop-query -d '`[key.normalize] drop_query`: leave this parameter out (repeatable)' -r
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l keep-query -d '`[key.normalize] keep_query`: keep only this parameter (repeatable)' -r
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l to-key-config -d 'A migration\'s new side\'s `[key]` (a router\'s config file, or one holding only `[key]`): each side routes its own key, the side chosen by the new key, as the router does with `[migration.key]`; the old side keeps the key above (by default the router\'s, `$request_uri`)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l request-format -d 'How the input lines say a request, when a key is given: `target` (the request target as sent, origin-form `/a?b` or absolute-form `http://host/a?b`) or `access-log` (the router\'s JSON access log, whose lines carry the fields a configured key reads)' -r -f -a "target\t'A request target as sent'
access-log\t'A line of the router\'s JSON access log'"
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l json -d 'Print one JSON object instead of the table'
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l sort-query -d '`[key.normalize] sort_query`: sort the query\'s parameters'
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -l lowercase-host -d '`[key.normalize] lowercase_host`'
complete -c ketama -n "__fish_ketama_using_subcommand analyze" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l nodes -d 'Servers per ring (synthetic 10.A.B.C:PORT names, drawn from --seed)' -r
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l from -d 'Smallest points per node' -r
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l to -d 'Largest points per node' -r
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l steps -d 'Points-per-node values, spaced on a log scale' -r
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l trials -d 'Random node sets per value' -r
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l seed -d 'Seed of the first node set (trial t uses seed + t)' -r
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l compat -d 'Hashing scheme: nginx, pingora-v1 or pingora-v2 (libmemcached and twemproxy fix their points per server and haproxy its 16 per weight unit, and envoy-ring-hash and maglev size their rings from their own settings, so there is nothing to vary)' -r
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l out -d 'CSV output' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -l plot -d 'SVG chart output' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand sweep" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand recommend" -l servers -d 'Servers file' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand recommend" -l max-cv -d 'The largest CV of a server\'s share to accept' -r
complete -c ketama -n "__fish_ketama_using_subcommand recommend" -l max-extra-error -d 'The most the CV may grow over the one measured at the current point multiple (absolute, e.g. 0.01)' -r
complete -c ketama -n "__fish_ketama_using_subcommand recommend" -l compat -d 'Hashing scheme: nginx, pingora-v1 or pingora-v2 (libmemcached and twemproxy fix their points per server and haproxy its 16 per weight unit, and envoy-ring-hash and maglev size their rings from their own settings, so there is nothing to vary)' -r
complete -c ketama -n "__fish_ketama_using_subcommand recommend" -l point-multiple -d 'The current points per weight unit (at least 1)' -r
complete -c ketama -n "__fish_ketama_using_subcommand recommend" -l json -d 'Print one JSON object'
complete -c ketama -n "__fish_ketama_using_subcommand recommend" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l from -d 'Servers file of the current ring' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l to -d 'Servers file of the new ring' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l from-compat -d 'Scheme of the current ring: nginx, pingora-v1, pingora-v2, libmemcached, twemproxy, haproxy, envoy-ring-hash or maglev (as --compat)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l from-key-hash -d 'twemproxy key hash of the current ring (as --key-hash)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l from-layout -d 'Layout of the current ring: wide, packed or compact' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l from-point-multiple -d 'Point multiple of the current ring (at least 1)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l to-compat -d 'Scheme of the new ring: nginx, pingora-v1, pingora-v2, libmemcached, twemproxy, haproxy, envoy-ring-hash or maglev (as --compat)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l to-key-hash -d 'twemproxy key hash of the new ring (as --key-hash)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l to-layout -d 'Layout of the new ring: wide, packed or compact' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l to-point-multiple -d 'Point multiple of the new ring (at least 1)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l samples -d 'Keys sampled when the two rings hash keys differently (CDN-like 30-byte paths; see --keys)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l keys -d 'Sample these keys (one per line) instead, when the rings hash keys differently: the estimate is then for your own keys' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l key-config -d 'Take each request\'s key as a router with this file\'s `[key]` does (a router\'s config file, or one holding only `[key]`); the input lines are then requests (see --request-format)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l key-template -d '`[key] template`: nginx\'s `hash <template>` (e.g. \'$host$request_uri\', \'$cookie_sid\')' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l key-balance -d '`[key] balance`: HAProxy\'s balance line (e.g. \'url_param id\', \'hdr(host) use_domain_only\')' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l drop-query -d '`[key.normalize] drop_query`: leave this parameter out (repeatable)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l keep-query -d '`[key.normalize] keep_query`: keep only this parameter (repeatable)' -r
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l to-key-config -d 'A migration\'s new side\'s `[key]` (a router\'s config file, or one holding only `[key]`): each side routes its own key, the side chosen by the new key, as the router does with `[migration.key]`; the old side keeps the key above (by default the router\'s, `$request_uri`)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l request-format -d 'How the input lines say a request, when a key is given: `target` (the request target as sent, origin-form `/a?b` or absolute-form `http://host/a?b`) or `access-log` (the router\'s JSON access log, whose lines carry the fields a configured key reads)' -r -f -a "target\t'A request target as sent'
access-log\t'A line of the router\'s JSON access log'"
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l json -d 'Print one JSON object'
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l sort-query -d '`[key.normalize] sort_query`: sort the query\'s parameters'
complete -c ketama -n "__fish_ketama_using_subcommand diff" -l lowercase-host -d '`[key.normalize] lowercase_host`'
complete -c ketama -n "__fish_ketama_using_subcommand diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l from -d 'Servers file of the current ring' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l to -d 'Servers file of the new ring' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l from-compat -d 'Scheme of the current ring: nginx, pingora-v1, pingora-v2, libmemcached, twemproxy, haproxy, envoy-ring-hash or maglev (as --compat)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l from-key-hash -d 'twemproxy key hash of the current ring (as --key-hash)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l from-layout -d 'Layout of the current ring: wide, packed or compact' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l from-point-multiple -d 'Point multiple of the current ring (at least 1)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l to-compat -d 'Scheme of the new ring: nginx, pingora-v1, pingora-v2, libmemcached, twemproxy, haproxy, envoy-ring-hash or maglev (as --compat)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l to-key-hash -d 'twemproxy key hash of the new ring (as --key-hash)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l to-layout -d 'Layout of the new ring: wide, packed or compact' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l to-point-multiple -d 'Point multiple of the new ring (at least 1)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l steps -d 'Rollout steps in basis points, comma-separated' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l trace -d 'The requests, in order (see --trace-format; .gz and .zst files are read as they are)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l trace-format -d 'The trace\'s format: txt (one key per line, what follows a tab ignored; the default), csv (see --csv-key-col) or oracleGeneral (libCacheSim\'s binary records)' -r -f -a "txt\t'One key per line; what follows a tab is ignored'
csv\t'Delimited fields: see the --csv-* options'
oracleGeneral\t'libCacheSim\'s 24-byte binary records'"
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l csv-key-col -d 'csv: the column (1-based) holding the key' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l csv-size-col -d 'csv: the column (1-based) holding the object\'s size (checked to be a number)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l csv-time-col -d 'csv: the column (1-based) holding the request\'s time (checked to be a number)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l csv-delimiter -d 'csv: the field delimiter' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l cache-key -d 'With the key options: what the caches key objects by, `new-key` (the new side\'s routing key: the cache\'s key changes with it) or `target` (the request target as sent)' -r -f -a "new-key\t'The new side\'s routing key'
target\t'The request target as sent'"
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l objects -d 'Synthetic workload: distinct objects' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l zipf -d 'Synthetic workload: Zipf exponent' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l requests -d 'Synthetic workload: requests' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l seed -d 'Synthetic workload: seed' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l object-size -d 'Every object\'s size in bytes (then --cache-bytes sizes caches)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l cache-objects -d 'Objects each server\'s cache holds' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l cache-bytes -d 'Bytes each server\'s cache holds (with --object-size)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l warmup -d 'Requests served by the old ring first, not counted' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l requests-per-step -d 'Requests each step serves (the last step: the rest)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l window -d 'Requests per window of the origin series' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l max-origin-factor -d 'Find the fewest steps from the ladder 1, 2, 5, 10, 25, 50, 100% whose peak window stays under X times the steady state' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l chart -d 'Draw origin fetches per window, the schedule against a one-shot switch (each with and without fill, with --fill-from-previous), to this file (.svg or .png)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l key-config -d 'Take each request\'s key as a router with this file\'s `[key]` does (a router\'s config file, or one holding only `[key]`); the input lines are then requests (see --request-format)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l key-template -d '`[key] template`: nginx\'s `hash <template>` (e.g. \'$host$request_uri\', \'$cookie_sid\')' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l key-balance -d '`[key] balance`: HAProxy\'s balance line (e.g. \'url_param id\', \'hdr(host) use_domain_only\')' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l drop-query -d '`[key.normalize] drop_query`: leave this parameter out (repeatable)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l keep-query -d '`[key.normalize] keep_query`: keep only this parameter (repeatable)' -r
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l to-key-config -d 'A migration\'s new side\'s `[key]` (a router\'s config file, or one holding only `[key]`): each side routes its own key, the side chosen by the new key, as the router does with `[migration.key]`; the old side keeps the key above (by default the router\'s, `$request_uri`)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l request-format -d 'How the input lines say a request, when a key is given: `target` (the request target as sent, origin-form `/a?b` or absolute-form `http://host/a?b`) or `access-log` (the router\'s JSON access log, whose lines carry the fields a configured key reads)' -r -f -a "target\t'A request target as sent'
access-log\t'A line of the router\'s JSON access log'"
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l json -d 'Print one JSON object'
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l simulate -d 'Simulate every server\'s cache through the schedule'
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l csv-header -d 'csv: the first line is a header'
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l cache-by-weight -d 'Caches in proportion to the servers\' weights (the mean weight gets the size given)'
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l fill-from-previous -d 'A moved key\'s miss looks in its previous owner\'s cache first'
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l sort-query -d '`[key.normalize] sort_query`: sort the query\'s parameters'
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -l lowercase-host -d '`[key.normalize] lowercase_host`'
complete -c ketama -n "__fish_ketama_using_subcommand migrate-plan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l servers -d 'Servers file: one `SERVER [WEIGHT] [key=value ...] [down]` per line' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l compat -d 'Hashing scheme: nginx, pingora-v1, pingora-v2, libmemcached, twemproxy (see --key-hash), haproxy (HAProxy\'s `hash-type consistent`: sdbm with avalanche; haproxy:FUNCTION[+avalanche] for sdbm, djb2, wt6 or crc32), envoy-ring-hash (Envoy\'s and gRPC\'s ring_hash; envoy-ring-hash:min=N,max=N[,murmur2], or :grpc for gRPC\'s sizes) or maglev (Envoy\'s; maglev:PRIME for the table size)' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l key-hash -d 'twemproxy\'s key hash: md5, fnv1a_64 (twemproxy\'s default), fnv1a_32, fnv1_64, fnv1_32, crc16, crc32, crc32a, one_at_a_time, hsieh, murmur or jenkins' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l layout -d 'Storage layout: wide, packed or compact (routing is the same in every layout)' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l point-multiple -d 'Points per weight unit (at least 1; the memcached schemes take only their own 160, haproxy only its 16, which the default stands for)' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l balance -d 'Balance factors to compare, in percent (100 to 1000), or `off` (plain consistent hashing); comma-separated' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l requests -d 'Requests placed' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l population -d 'Distinct keys of the Zipf distribution (`/obj/1` to `/obj/P`)' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l zipf -d 'Zipf exponent s (0: uniform; 1.1 is typical of web objects)' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l concurrency -d 'Requests in flight at all times (10x the servers or more, or the rounding of the bound dominates)' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l service -d 'Service times: exponential with mean 1, or exactly 1' -r -f -a "exp\t'Exponential, mean 1'
fixed\t'Exactly 1'"
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l seed -d 'Seed of the draws' -r
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l trace -d 'Replay the keys of this file (one per line, in order, cycled up to --requests) instead of Zipf draws' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l plot -d 'Also draw the trade-off (max load / average and own-node share against the factor) as an SVG chart' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -l json -d 'Print JSON: {"requests": N, "factors": [{"balance": 125 or null, "max_over_avg", "own_node_share", "spills_per_request", "moved_keys"}]}'
complete -c ketama -n "__fish_ketama_using_subcommand simulate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and not __fish_seen_subcommand_from push rollout status plan help" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and not __fish_seen_subcommand_from push rollout status plan help" -f -a "push" -d 'Check a routing config as every router will, then write it to PREFIX/config (compare-and-swap on its mod revision)'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and not __fish_seen_subcommand_from push rollout status plan help" -f -a "rollout" -d 'Write the rollout to PREFIX/rollout (compare-and-swap)'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and not __fish_seen_subcommand_from push rollout status plan help" -f -a "status" -d 'Every registered router: scope, applied revisions, lag, rollout in force for its scope'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and not __fish_seen_subcommand_from push rollout status plan help" -f -a "plan" -d 'A rollout plan that steps itself under guards: run, status, pause, resume, abort'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and not __fish_seen_subcommand_from push rollout status plan help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l etcd -d 'etcd endpoint URLs, comma-separated (or repeat the flag)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l prefix -d 'The fleet\'s key prefix, as in the routers\' [control] prefix' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l user-env -d 'Environment variable holding the etcd user (auth enabled)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l password-env -d 'Environment variable holding the etcd password' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l ca-file -d 'PEM file of the CA of etcd\'s certificate (https)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l cert-file -d 'PEM client certificate (with --key-file)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l key-file -d 'PEM key of --cert-file' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l timeout-ms -d 'Request timeout in milliseconds' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l config -d 'The routing config (TOML: ring, key, backends, label_rules, migration, health, balance, discovery)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -l expect-revision -d 'Write only if PREFIX/config\'s mod revision is still N (0: absent); default: the revision read just before writing' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from push" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l etcd -d 'etcd endpoint URLs, comma-separated (or repeat the flag)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l prefix -d 'The fleet\'s key prefix, as in the routers\' [control] prefix' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l user-env -d 'Environment variable holding the etcd user (auth enabled)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l password-env -d 'Environment variable holding the etcd password' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l ca-file -d 'PEM file of the CA of etcd\'s certificate (https)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l cert-file -d 'PEM client certificate (with --key-file)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l key-file -d 'PEM key of --cert-file' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l timeout-ms -d 'Request timeout in milliseconds' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l global-bp -d 'Share of keys on the new ring everywhere, in basis points (0-10000)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l scope -d 'A scope\'s own share: NAME=BP (repeat for several)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -l expect-revision -d 'Write only if PREFIX/rollout\'s mod revision is still N (0: absent)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from rollout" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l etcd -d 'etcd endpoint URLs, comma-separated (or repeat the flag)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l prefix -d 'The fleet\'s key prefix, as in the routers\' [control] prefix' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l user-env -d 'Environment variable holding the etcd user (auth enabled)' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l password-env -d 'Environment variable holding the etcd password' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l ca-file -d 'PEM file of the CA of etcd\'s certificate (https)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l cert-file -d 'PEM client certificate (with --key-file)' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l key-file -d 'PEM key of --cert-file' -r -F
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l timeout-ms -d 'Request timeout in milliseconds' -r
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -l json -d 'Print one JSON object instead of the table'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -f -a "run" -d 'Store PLAN.toml as the fleet\'s active plan and run its controller until the plan ends (no file: take over the stored active plan). Exit status: 0 completed, 2 rolled back or stepped back, 3 aborted, 1 an error'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -f -a "status" -d 'The plan\'s stages, steps and last checks'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -f -a "pause" -d 'Pause the running plan (its controller waits)'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -f -a "resume" -d 'Resume a paused plan: its current step is written again'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -f -a "abort" -d 'End the plan where it is (with --rollback: every scope back to its share at plan start)'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -f -a "approve" -d 'Open the gate the plan waits at (a stage with `approve = true`): its first step is applied'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -f -a "promote" -d 'End the current step\'s hold now: the plan moves on at the next check that passes'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from plan" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "push" -d 'Check a routing config as every router will, then write it to PREFIX/config (compare-and-swap on its mod revision)'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "rollout" -d 'Write the rollout to PREFIX/rollout (compare-and-swap)'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "status" -d 'Every registered router: scope, applied revisions, lag, rollout in force for its scope'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "plan" -d 'A rollout plan that steps itself under guards: run, status, pause, resume, abort'
complete -c ketama -n "__fish_ketama_using_subcommand fleet; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ketama -n "__fish_ketama_using_subcommand import; and not __fish_seen_subcommand_from haproxy help" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand import; and not __fish_seen_subcommand_from haproxy help" -f -a "haproxy" -d 'A HAProxy backend\'s `server` lines (address, weight, id, disabled) as a servers file for `--compat haproxy`'
complete -c ketama -n "__fish_ketama_using_subcommand import; and not __fish_seen_subcommand_from haproxy help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ketama -n "__fish_ketama_using_subcommand import; and __fish_seen_subcommand_from haproxy" -l backend -d 'The backend (or listen section) to read; optional when only one has servers' -r
complete -c ketama -n "__fish_ketama_using_subcommand import; and __fish_seen_subcommand_from haproxy" -s h -l help -d 'Print help'
complete -c ketama -n "__fish_ketama_using_subcommand import; and __fish_seen_subcommand_from help" -f -a "haproxy" -d 'A HAProxy backend\'s `server` lines (address, weight, id, disabled) as a servers file for `--compat haproxy`'
complete -c ketama -n "__fish_ketama_using_subcommand import; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ketama -n "__fish_ketama_using_subcommand generate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "route" -d 'Route keys read from stdin (one per line) to servers; with a key (--key-config, --key-template, ...), requests, each routed by what the key takes of it as the router takes it (`*`: the key took nothing, and the router sends it round robin)'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "bench" -d 'Build and query the same ring with each ketama layout and with pingora-ketama v1 and v2; print a markdown table of medians'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "analyze" -d 'Per-server and overall balance of a ring: exact shares, collisions, predicted and measured CV, memory per layout'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "sweep" -d 'Predicted and measured CV over a range of points per server (CSV, optional SVG chart)'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "recommend" -d 'The smallest point multiple that meets a balance target'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "diff" -d 'The exact share of keys whose server changes between two rings; with a key (and --to-key-config), the share of the requests of --keys whose server changes when the ring and the key change'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "migrate-plan" -d 'For each rollout step (basis points), the expected share of keys whose server changes against the old ring'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "simulate" -d 'Replay a workload with bounded loads at several balance factors: max load / average, own-node share, spills, moved keys'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "fleet" -d 'Steer a fleet of ketama-routers through etcd: push the routing config, set the rollout, see what every router applied'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "import" -d 'Write a ketama servers file from another proxy\'s configuration (HAProxy\'s `server` lines)'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "generate" -d 'Write the man pages or shell completions (for packagers)'
complete -c ketama -n "__fish_ketama_using_subcommand help; and not __fish_seen_subcommand_from route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c ketama -n "__fish_ketama_using_subcommand help; and __fish_seen_subcommand_from fleet" -f -a "push" -d 'Check a routing config as every router will, then write it to PREFIX/config (compare-and-swap on its mod revision)'
complete -c ketama -n "__fish_ketama_using_subcommand help; and __fish_seen_subcommand_from fleet" -f -a "rollout" -d 'Write the rollout to PREFIX/rollout (compare-and-swap)'
complete -c ketama -n "__fish_ketama_using_subcommand help; and __fish_seen_subcommand_from fleet" -f -a "status" -d 'Every registered router: scope, applied revisions, lag, rollout in force for its scope'
complete -c ketama -n "__fish_ketama_using_subcommand help; and __fish_seen_subcommand_from fleet" -f -a "plan" -d 'A rollout plan that steps itself under guards: run, status, pause, resume, abort'
complete -c ketama -n "__fish_ketama_using_subcommand help; and __fish_seen_subcommand_from import" -f -a "haproxy" -d 'A HAProxy backend\'s `server` lines (address, weight, id, disabled) as a servers file for `--compat haproxy`'
