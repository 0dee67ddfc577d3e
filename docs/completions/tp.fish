# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_tp_global_optspecs
    string join \n h/help V/version
end

function __fish_tp_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_tp_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_tp_using_subcommand
    set -l cmd (__fish_tp_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c tp -n "__fish_tp_needs_command" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_needs_command" -s V -l version -d 'Print version'
complete -c tp -n "__fish_tp_needs_command" -f -a "report" -d 'Print a trace file exactly as the kernel\'s `trace` file would'
complete -c tp -n "__fish_tp_needs_command" -f -a "list" -d 'List the running kernel\'s events (optionally matching a glob)'
complete -c tp -n "__fish_tp_needs_command" -f -a "format" -d 'Print an event\'s format file'
complete -c tp -n "__fish_tp_needs_command" -f -a "record" -d 'Record kernel tracepoints into a trace.dat file'
complete -c tp -n "__fish_tp_needs_command" -f -a "extract" -d 'Write a tracefs buffer\'s contents to a trace.dat file (reading consumes them, as `trace-cmd extract` does)'
complete -c tp -n "__fish_tp_needs_command" -f -a "stream" -d 'Print events live as the kernel renders them (like trace_pipe)'
complete -c tp -n "__fish_tp_needs_command" -f -a "syscalls" -d 'strace -c\'s summary from a recording: calls, errors, time per syscall and task'
complete -c tp -n "__fish_tp_needs_command" -f -a "sched" -d 'Scheduling latency from a recording: waits to run, run time, preemptions, migrations'
complete -c tp -n "__fish_tp_needs_command" -f -a "stat" -d 'Count events through perf_event_open, like `perf stat`'
complete -c tp -n "__fish_tp_needs_command" -f -a "faults" -d 'Page faults from a recording: per task, kind, page, instruction and file'
complete -c tp -n "__fish_tp_needs_command" -f -a "probe" -d 'Define, list and remove dynamic probes on a binary\'s functions (uprobes)'
complete -c tp -n "__fish_tp_needs_command" -f -a "convert" -d 'Convert a recording to another tool\'s format (Perfetto, Firefox Profiler)'
complete -c tp -n "__fish_tp_needs_command" -f -a "trace" -d 'bpftrace\'s language compiled to BPF: aggregate in the kernel, print as bpftrace'
complete -c tp -n "__fish_tp_needs_command" -f -a "generate-docs" -d 'Write the man pages and shell completions (for the repository\'s docs/)'
complete -c tp -n "__fish_tp_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c tp -n "__fish_tp_using_subcommand report" -s i -l input -d 'The trace file: trace.dat v6 or v7 (as tp record or trace-cmd writes it) or perf.data (as perf record or tp writes it). Several (`-i a.dat -i b.data`): one timeline, their records merged by time (record them on the same clock: tp\'s trace.dat and perf.data both use CLOCK_MONOTONIC), each line as it prints alone, without header' -r
complete -c tp -n "__fish_tp_using_subcommand report" -s e -l event -d 'Only events matching this glob (`sched`, `sched:sched_switch`, `*:*wakeup*`); repeatable' -r
complete -c tp -n "__fish_tp_using_subcommand report" -s C -l cpu -d 'Only events of these CPUs (`-C 0 -C 2` or `-C 0,2`)' -r
complete -c tp -n "__fish_tp_using_subcommand report" -s P -l pid -d 'Only events of these pids (`-P 1234`, repeatable or comma separated)' -r
complete -c tp -n "__fish_tp_using_subcommand report" -s B -l buffer -d 'Only this buffer (instance name as trace-cmd stores it; "" is the top-level buffer)' -r
complete -c tp -n "__fish_tp_using_subcommand report" -l flamegraph -d 'perf.data: write a flame graph of the samples\' stacks to this SVG file' -r
complete -c tp -n "__fish_tp_using_subcommand report" -l raw -d 'Print each event\'s fields (`name: field=value ...`) instead of its print fmt'
complete -c tp -n "__fish_tp_using_subcommand report" -l json -d 'One JSON object per line and event, with typed fields'
complete -c tp -n "__fish_tp_using_subcommand report" -l stat -d 'Statistics instead of events: events per type and CPU, lost events per CPU'
complete -c tp -n "__fish_tp_using_subcommand report" -l tgid -d 'Print the TGID column (as the kernel does with options/record-tgid)'
complete -c tp -n "__fish_tp_using_subcommand report" -l no-header -d 'Leave out the header block'
complete -c tp -n "__fish_tp_using_subcommand report" -l sym-userobj -d 'User stacks (`<user stack trace>`) as the kernel prints them with its `sym-userobj` option: each address as the file mapped there and the offset in that mapping (`/usr/lib/x86_64-linux-gnu/libc.so.6[+0x2a1ca]`), from the processes\' maps the recording saved; addresses outside file mappings stay ` <address>`'
complete -c tp -n "__fish_tp_using_subcommand report" -l sym-offset -d 'Code addresses of ftrace\'s own events (kernel stack frames, `function`) with their offset and size, as the kernel\'s `sym-offset` option prints them (`do_syscall_64+0x1fa/0x280`)'
complete -c tp -n "__fish_tp_using_subcommand report" -l sym-addr -d '... and with the address after them, as the kernel\'s `sym-addr` option (`do_syscall_64 <ffffffff821ed69a>`; user stack frames too)'
complete -c tp -n "__fish_tp_using_subcommand report" -l show-task-events -d 'perf.data: also print COMM, FORK and EXIT records (as perf script does)'
complete -c tp -n "__fish_tp_using_subcommand report" -l show-mmap-events -d 'perf.data: also print MMAP and MMAP2 records (as perf script does)'
complete -c tp -n "__fish_tp_using_subcommand report" -l srcline -d 'perf.data: each frame\'s source `file:line` (from DWARF), under it as perf script -F +srcline prints it'
complete -c tp -n "__fish_tp_using_subcommand report" -l no-inline -d 'perf.data: stacks without the functions DWARF places at each frame (inlined calls, printed `name+off (inlined)` by default, as perf script does): no DWARF is read'
complete -c tp -n "__fish_tp_using_subcommand report" -l folded -d 'perf.data: collapsed stacks, one line per distinct stack: `comm;outer;...;inner count` (as stackcollapse-perf makes from perf script\'s output)'
complete -c tp -n "__fish_tp_using_subcommand report" -l top -d 'perf.data: the hottest functions, with the share of samples in each function itself (self) and in it or what it called (children), as perf report --stdio'
complete -c tp -n "__fish_tp_using_subcommand report" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand list" -l program -d 'List this program\'s tracepoints instead of the kernel\'s. The program is run with `TP_LIST_FORMATS=FILE` (and no arguments); it must call `tp::init_from_env()`, which writes every tracepoint\'s format there and exits' -r
complete -c tp -n "__fish_tp_using_subcommand list" -s F -l fields -d 'Also print each event\'s fields (C type, name, offset, size)'
complete -c tp -n "__fish_tp_using_subcommand list" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand format" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand record" -s e -l event -d 'Events: `sched`, `sched:sched_*`, `syscalls:sys_enter_openat`, `*:*` (repeatable; as `tp list GLOB` shows)' -r
complete -c tp -n "__fish_tp_using_subcommand record" -s f -l filter -d 'Filter for the preceding -e, in the kernel\'s filter syntax (e.g. \'common_pid == 1\')' -r
complete -c tp -n "__fish_tp_using_subcommand record" -s p -l pid -d 'Trace these processes (repeatable; all their threads)' -r
complete -c tp -n "__fish_tp_using_subcommand record" -s b -l buffer-size -d 'Per-CPU buffer size in KiB' -r
complete -c tp -n "__fish_tp_using_subcommand record" -s C -l clock -d 'Trace clock (local, global, mono, mono_raw, boot, x86-tsc, ...)' -r
complete -c tp -n "__fish_tp_using_subcommand record" -l stack-trigger -d 'The kernel stack only for events matching GLOB, and with `if FILTER` only for the hits the filter keeps: the per-event `stacktrace` trigger, e.g. `--stack-trigger \'sched:sched_switch if prev_state == 2\'` (repeatable; the events must be recorded, -e)' -r
complete -c tp -n "__fish_tp_using_subcommand record" -s o -l output -d 'Output file' -r -F
complete -c tp -n "__fish_tp_using_subcommand record" -l compress -d 'Compression of the trace.dat sections (version 7 only)' -r -f -a "zstd\t''
none\t''"
complete -c tp -n "__fish_tp_using_subcommand record" -l file-version -d 'trace.dat version' -r
complete -c tp -n "__fish_tp_using_subcommand record" -s F -l freq -d 'Sample at this frequency (Hz) on events that are not tracepoints or breakpoints (default 4000, as perf record)' -r
complete -c tp -n "__fish_tp_using_subcommand record" -l period -d 'Sample every N events (tracepoints and breakpoints default to every event)' -r
complete -c tp -n "__fish_tp_using_subcommand record" -l call-graph -d 'Call stacks: `fp` (the kernel walks frame pointers) or `dwarf[,SIZE]` (the user registers and SIZE bytes of the user stack, default 8192, unwound offline by tp (crate tp-stack) and by `perf script` from the binaries\' .eh_frame/.debug_frame; kernel frames by the kernel)' -r
complete -c tp -n "__fish_tp_using_subcommand record" -l max-stack -d 'At most N frames per callchain (default and limit: kernel.perf_event_max_stack)' -r
complete -c tp -n "__fish_tp_using_subcommand record" -l duration -d 'Stop after this long (e.g. 10s, 500ms, 2m); otherwise at Ctrl-C or when the command ends. A command still running then keeps running, untraced' -r
complete -c tp -n "__fish_tp_using_subcommand record" -s B -l instance -d 'Use (and restore) an existing instance instead of a private one' -r
complete -c tp -n "__fish_tp_using_subcommand record" -s x -l exec -d 'The binary whose USDT probes `-e sdt_PROVIDER:NAME` names (default: the command\'s)' -r -F
complete -c tp -n "__fish_tp_using_subcommand record" -s c -l children -d 'With -p: also trace the processes they start from now on (trace-cmd\'s -c)'
complete -c tp -n "__fish_tp_using_subcommand record" -s a -l all -d 'Trace all processes (the default without -p or a command); with a command, all of them for the command\'s life (`-a -- sleep 5`, as perf record -a does)'
complete -c tp -n "__fish_tp_using_subcommand record" -l keep-recorder -d 'Keep the events of traced Rust programs\' own `tp-recorder` threads (crate `tp`\'s drain thread), left out by default as tp\'s own threads are'
complete -c tp -n "__fish_tp_using_subcommand record" -s T -l kernel-stack -d 'Follow every recorded event with the kernel\'s stack at that point (the instance\'s `stacktrace` option; `ftrace:kernel_stack` records)'
complete -c tp -n "__fish_tp_using_subcommand record" -s U -l user-stack -d 'Follow every recorded event with the user-space stack of its task, as the kernel walks it by frame pointers (the `userstacktrace` option; `ftrace:user_stack` records, up to 8 return addresses); a traced Rust program\'s own events too (`TP_STACKS`, unless set)'
complete -c tp -n "__fish_tp_using_subcommand record" -l perf -d 'Record through perf_event_open into perf.data even when every event is a tracepoint'
complete -c tp -n "__fish_tp_using_subcommand record" -s g -d 'Record each sample\'s call stack by frame pointers, kernel and user (`--call-graph fp`). Tracepoints go through perf_event_open too: tracefs records no user stacks'
complete -c tp -n "__fish_tp_using_subcommand record" -l as-root -d 'Under sudo, run the command (and own the output) as root; by default the command runs as the user who ran sudo (SUDO_UID/SUDO_GID, their groups, HOME/USER/LOGNAME) and the output is theirs'
complete -c tp -n "__fish_tp_using_subcommand record" -s q -l quiet -d 'No status line and no summary'
complete -c tp -n "__fish_tp_using_subcommand record" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand extract" -s B -l instance -d 'The instance to extract (default: the top-level buffer); the file names its buffer NAME, as trace-cmd does. Its pages are consumed: a second extract finds them gone' -r
complete -c tp -n "__fish_tp_using_subcommand extract" -s o -l output -d 'Output file' -r -F
complete -c tp -n "__fish_tp_using_subcommand extract" -l compress -d 'Compression of the trace.dat sections (version 7 only)' -r -f -a "zstd\t''
none\t''"
complete -c tp -n "__fish_tp_using_subcommand extract" -l file-version -d 'trace.dat version' -r
complete -c tp -n "__fish_tp_using_subcommand extract" -s q -l quiet -d 'No summary'
complete -c tp -n "__fish_tp_using_subcommand extract" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand stream" -s e -l event -d 'Events: `sched`, `sched:sched_*`, `syscalls:sys_enter_openat`, `*:*` (repeatable; as `tp list GLOB` shows)' -r
complete -c tp -n "__fish_tp_using_subcommand stream" -s f -l filter -d 'Filter for the preceding -e, in the kernel\'s filter syntax (e.g. \'common_pid == 1\')' -r
complete -c tp -n "__fish_tp_using_subcommand stream" -s p -l pid -d 'Trace these processes (repeatable; all their threads)' -r
complete -c tp -n "__fish_tp_using_subcommand stream" -s b -l buffer-size -d 'Per-CPU buffer size in KiB' -r
complete -c tp -n "__fish_tp_using_subcommand stream" -s C -l clock -d 'Trace clock (local, global, mono, mono_raw, boot, x86-tsc, ...)' -r
complete -c tp -n "__fish_tp_using_subcommand stream" -l stack-trigger -d 'The kernel stack only for events matching GLOB, and with `if FILTER` only for the hits the filter keeps: the per-event `stacktrace` trigger, e.g. `--stack-trigger \'sched:sched_switch if prev_state == 2\'` (repeatable; the events must be recorded, -e)' -r
complete -c tp -n "__fish_tp_using_subcommand stream" -l duration -d 'Stop after this long (e.g. 10s, 500ms)' -r
complete -c tp -n "__fish_tp_using_subcommand stream" -s c -l children -d 'With -p: also trace the processes they start from now on (trace-cmd\'s -c)'
complete -c tp -n "__fish_tp_using_subcommand stream" -s a -l all -d 'Trace all processes (the default without -p or a command); with a command, all of them for the command\'s life (`-a -- sleep 5`, as perf record -a does)'
complete -c tp -n "__fish_tp_using_subcommand stream" -l keep-recorder -d 'Keep the events of traced Rust programs\' own `tp-recorder` threads (crate `tp`\'s drain thread), left out by default as tp\'s own threads are'
complete -c tp -n "__fish_tp_using_subcommand stream" -s T -l kernel-stack -d 'Follow every recorded event with the kernel\'s stack at that point (the instance\'s `stacktrace` option; `ftrace:kernel_stack` records)'
complete -c tp -n "__fish_tp_using_subcommand stream" -s U -l user-stack -d 'Follow every recorded event with the user-space stack of its task, as the kernel walks it by frame pointers (the `userstacktrace` option; `ftrace:user_stack` records, up to 8 return addresses); a traced Rust program\'s own events too (`TP_STACKS`, unless set)'
complete -c tp -n "__fish_tp_using_subcommand stream" -l tgid -d 'Print the context columns with the tgid, as `options/record-tgid` does'
complete -c tp -n "__fish_tp_using_subcommand stream" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand syscalls" -s i -l input -d 'The recording: a trace.dat (v6 or v7) or a perf.data' -r -F
complete -c tp -n "__fish_tp_using_subcommand syscalls" -s P -l pid -d 'Only these tasks (thread IDs, as the trace\'s pid column; repeatable or comma separated)' -r
complete -c tp -n "__fish_tp_using_subcommand syscalls" -l comm -d 'Only tasks whose command name matches this glob (repeatable)' -r
complete -c tp -n "__fish_tp_using_subcommand syscalls" -l from -d 'Start of the window: seconds as `tp report` prints them (`5044.055066`), or `+S` seconds after the first event' -r
complete -c tp -n "__fish_tp_using_subcommand syscalls" -l to -d 'End of the window (inclusive), in the same forms as --from' -r
complete -c tp -n "__fish_tp_using_subcommand syscalls" -l top -d 'Tasks shown in the per-task table (all in JSON)' -r
complete -c tp -n "__fish_tp_using_subcommand syscalls" -l json -d 'One JSON object instead of tables'
complete -c tp -n "__fish_tp_using_subcommand syscalls" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand sched" -s i -l input -d 'The recording: a trace.dat (v6 or v7) or a perf.data' -r -F
complete -c tp -n "__fish_tp_using_subcommand sched" -s P -l pid -d 'Only these tasks (thread IDs, as the trace\'s pid column; repeatable or comma separated)' -r
complete -c tp -n "__fish_tp_using_subcommand sched" -l comm -d 'Only tasks whose command name matches this glob (repeatable)' -r
complete -c tp -n "__fish_tp_using_subcommand sched" -l from -d 'Start of the window: seconds as `tp report` prints them (`5044.055066`), or `+S` seconds after the first event' -r
complete -c tp -n "__fish_tp_using_subcommand sched" -l to -d 'End of the window (inclusive), in the same forms as --from' -r
complete -c tp -n "__fish_tp_using_subcommand sched" -l top -d 'Tasks in the table (all in JSON)' -r
complete -c tp -n "__fish_tp_using_subcommand sched" -l worst -d 'The longest waits listed with their timestamps' -r
complete -c tp -n "__fish_tp_using_subcommand sched" -l json -d 'One JSON object instead of tables'
complete -c tp -n "__fish_tp_using_subcommand sched" -l per-task -d 'A histogram per task (runqlat -P) besides the one over all tasks'
complete -c tp -n "__fish_tp_using_subcommand sched" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand stat" -s e -l event -d 'Event to count, as perf spells it (repeatable, or comma-separated): `major-faults`, `cs:u`, `cycles`, `mem:ADDR[/LEN][:rwx]`, `mem:SYMBOL`, `sched:sched_switch`, globs; `{a,b}` is a group (counted together, read at once; `{a,b}:u` applies `:u` to each)' -r
complete -c tp -n "__fish_tp_using_subcommand stat" -s p -l pid -d 'Count an existing process (all its threads and their children) until it exits or Ctrl-C' -r
complete -c tp -n "__fish_tp_using_subcommand stat" -s C -l cpu -d 'Count every task on these CPUs (`0`, `0-1,3`)' -r
complete -c tp -n "__fish_tp_using_subcommand stat" -s r -l repeat -d 'Run the command N times: means, and the standard deviation of the mean' -r
complete -c tp -n "__fish_tp_using_subcommand stat" -s I -l interval-print -d 'Print counts every MS milliseconds' -r
complete -c tp -n "__fish_tp_using_subcommand stat" -s x -l field-separator -d 'Machine-readable output, fields separated by SEP (perf\'s `-x,` layout)' -r
complete -c tp -n "__fish_tp_using_subcommand stat" -s a -l all-cpus -d 'Count every task on every CPU (system-wide), while CMD runs or until Ctrl-C'
complete -c tp -n "__fish_tp_using_subcommand stat" -s j -l json -d 'One JSON object per line (perf\'s `-j` fields)'
complete -c tp -n "__fish_tp_using_subcommand stat" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand faults" -s i -l input -d 'The recording: a trace.dat (v6 or v7) or a perf.data' -r -F
complete -c tp -n "__fish_tp_using_subcommand faults" -s P -l pid -d 'Only these tasks (thread IDs, as the trace\'s pid column; repeatable or comma separated)' -r
complete -c tp -n "__fish_tp_using_subcommand faults" -l comm -d 'Only tasks whose command name matches this glob (repeatable)' -r
complete -c tp -n "__fish_tp_using_subcommand faults" -l from -d 'Start of the window: seconds as `tp report` prints them (`5044.055066`), or `+S` seconds after the first event' -r
complete -c tp -n "__fish_tp_using_subcommand faults" -l to -d 'End of the window (inclusive), in the same forms as --from' -r
complete -c tp -n "__fish_tp_using_subcommand faults" -l top -d 'Rows in each table (all tasks in JSON; addresses up to this many there too)' -r
complete -c tp -n "__fish_tp_using_subcommand faults" -l json -d 'One JSON object instead of tables'
complete -c tp -n "__fish_tp_using_subcommand faults" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand probe" -s x -l exec -d 'The binary (executable or shared library) the probe goes into' -r -F
complete -c tp -n "__fish_tp_using_subcommand probe" -s F -l funcs -d 'List the binary\'s functions (demangled), those matching GLOB' -r
complete -c tp -n "__fish_tp_using_subcommand probe" -s d -l del -d 'Remove the probes GROUP:EVENT matching GLOB (`probe_x:*`)' -r
complete -c tp -n "__fish_tp_using_subcommand probe" -s a -l add -d 'Define a probe: FUNC[%return][+OFF], then fetch arguments (NAME=FETCHARG or FETCHARG: %di:u64, +0(%si):string, $retval). The default action with a FUNC'
complete -c tp -n "__fish_tp_using_subcommand probe" -l sdt -d 'List the binary\'s USDT probes (`.note.stapsdt`): provider, name, location, semaphore, argument specs'
complete -c tp -n "__fish_tp_using_subcommand probe" -s l -l list -d 'List the probes defined now'
complete -c tp -n "__fish_tp_using_subcommand probe" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand convert" -s i -l input -d 'The recording: a trace.dat (v6 or v7) or a perf.data' -r -F
complete -c tp -n "__fish_tp_using_subcommand convert" -l to -d 'The format to write' -r -f -a "perfetto\t'Perfetto\'s protobuf trace (ui.perfetto.dev opens it)'
firefox\t'The Firefox Profiler\'s processed profile of a perf.data\'s samples and stacks (profiler.firefox.com opens it)'"
complete -c tp -n "__fish_tp_using_subcommand convert" -s o -l output -d 'Output file' -r -F
complete -c tp -n "__fish_tp_using_subcommand convert" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c tp -n "__fish_tp_using_subcommand trace" -s e -d 'The program text (bpftrace\'s language)' -r
complete -c tp -n "__fish_tp_using_subcommand trace" -s c -d 'Run this command (split at blanks) and stop when it ends, as bpftrace\'s -c' -r
complete -c tp -n "__fish_tp_using_subcommand trace" -s p -d 'Only this process\'s events' -r
complete -c tp -n "__fish_tp_using_subcommand trace" -s l -d 'List the probes matching a pattern (`tracepoint:sched:*`) instead of running' -r
complete -c tp -n "__fish_tp_using_subcommand trace" -s f -d 'Output format, as bpftrace\'s -f (`text` or `json`)' -r
complete -c tp -n "__fish_tp_using_subcommand trace" -s v -d 'With -l: each tracepoint\'s fields'
complete -c tp -n "__fish_tp_using_subcommand trace" -s d -l dump -d 'Print the syntax tree and each event\'s BPF instructions instead of running'
complete -c tp -n "__fish_tp_using_subcommand trace" -l json -d 'bpftrace\'s `-f json`: one JSON object per line'
complete -c tp -n "__fish_tp_using_subcommand trace" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand generate-docs" -s h -l help -d 'Print help'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "report" -d 'Print a trace file exactly as the kernel\'s `trace` file would'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "list" -d 'List the running kernel\'s events (optionally matching a glob)'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "format" -d 'Print an event\'s format file'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "record" -d 'Record kernel tracepoints into a trace.dat file'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "extract" -d 'Write a tracefs buffer\'s contents to a trace.dat file (reading consumes them, as `trace-cmd extract` does)'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "stream" -d 'Print events live as the kernel renders them (like trace_pipe)'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "syscalls" -d 'strace -c\'s summary from a recording: calls, errors, time per syscall and task'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "sched" -d 'Scheduling latency from a recording: waits to run, run time, preemptions, migrations'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "stat" -d 'Count events through perf_event_open, like `perf stat`'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "faults" -d 'Page faults from a recording: per task, kind, page, instruction and file'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "probe" -d 'Define, list and remove dynamic probes on a binary\'s functions (uprobes)'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "convert" -d 'Convert a recording to another tool\'s format (Perfetto, Firefox Profiler)'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "trace" -d 'bpftrace\'s language compiled to BPF: aggregate in the kernel, print as bpftrace'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "generate-docs" -d 'Write the man pages and shell completions (for the repository\'s docs/)'
complete -c tp -n "__fish_tp_using_subcommand help; and not __fish_seen_subcommand_from report list format record extract stream syscalls sched stat faults probe convert trace generate-docs help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
