_ketama() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="ketama"
                ;;
            ketama,analyze)
                cmd="ketama__subcmd__analyze"
                ;;
            ketama,bench)
                cmd="ketama__subcmd__bench"
                ;;
            ketama,diff)
                cmd="ketama__subcmd__diff"
                ;;
            ketama,fleet)
                cmd="ketama__subcmd__fleet"
                ;;
            ketama,generate)
                cmd="ketama__subcmd__generate"
                ;;
            ketama,help)
                cmd="ketama__subcmd__help"
                ;;
            ketama,import)
                cmd="ketama__subcmd__import"
                ;;
            ketama,migrate-plan)
                cmd="ketama__subcmd__migrate__subcmd__plan"
                ;;
            ketama,recommend)
                cmd="ketama__subcmd__recommend"
                ;;
            ketama,route)
                cmd="ketama__subcmd__route"
                ;;
            ketama,simulate)
                cmd="ketama__subcmd__simulate"
                ;;
            ketama,sweep)
                cmd="ketama__subcmd__sweep"
                ;;
            ketama__subcmd__fleet,help)
                cmd="ketama__subcmd__fleet__subcmd__help"
                ;;
            ketama__subcmd__fleet,plan)
                cmd="ketama__subcmd__fleet__subcmd__plan"
                ;;
            ketama__subcmd__fleet,push)
                cmd="ketama__subcmd__fleet__subcmd__push"
                ;;
            ketama__subcmd__fleet,rollout)
                cmd="ketama__subcmd__fleet__subcmd__rollout"
                ;;
            ketama__subcmd__fleet,status)
                cmd="ketama__subcmd__fleet__subcmd__status"
                ;;
            ketama__subcmd__fleet__subcmd__help,help)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__help"
                ;;
            ketama__subcmd__fleet__subcmd__help,plan)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__plan"
                ;;
            ketama__subcmd__fleet__subcmd__help,push)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__push"
                ;;
            ketama__subcmd__fleet__subcmd__help,rollout)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__rollout"
                ;;
            ketama__subcmd__fleet__subcmd__help,status)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__status"
                ;;
            ketama__subcmd__fleet__subcmd__help__subcmd__plan,abort)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__abort"
                ;;
            ketama__subcmd__fleet__subcmd__help__subcmd__plan,approve)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__approve"
                ;;
            ketama__subcmd__fleet__subcmd__help__subcmd__plan,pause)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__pause"
                ;;
            ketama__subcmd__fleet__subcmd__help__subcmd__plan,promote)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__promote"
                ;;
            ketama__subcmd__fleet__subcmd__help__subcmd__plan,resume)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__resume"
                ;;
            ketama__subcmd__fleet__subcmd__help__subcmd__plan,run)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__run"
                ;;
            ketama__subcmd__fleet__subcmd__help__subcmd__plan,status)
                cmd="ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__status"
                ;;
            ketama__subcmd__fleet__subcmd__plan,abort)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__abort"
                ;;
            ketama__subcmd__fleet__subcmd__plan,approve)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__approve"
                ;;
            ketama__subcmd__fleet__subcmd__plan,help)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help"
                ;;
            ketama__subcmd__fleet__subcmd__plan,pause)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__pause"
                ;;
            ketama__subcmd__fleet__subcmd__plan,promote)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__promote"
                ;;
            ketama__subcmd__fleet__subcmd__plan,resume)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__resume"
                ;;
            ketama__subcmd__fleet__subcmd__plan,run)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__run"
                ;;
            ketama__subcmd__fleet__subcmd__plan,status)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__status"
                ;;
            ketama__subcmd__fleet__subcmd__plan__subcmd__help,abort)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__abort"
                ;;
            ketama__subcmd__fleet__subcmd__plan__subcmd__help,approve)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__approve"
                ;;
            ketama__subcmd__fleet__subcmd__plan__subcmd__help,help)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__help"
                ;;
            ketama__subcmd__fleet__subcmd__plan__subcmd__help,pause)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__pause"
                ;;
            ketama__subcmd__fleet__subcmd__plan__subcmd__help,promote)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__promote"
                ;;
            ketama__subcmd__fleet__subcmd__plan__subcmd__help,resume)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__resume"
                ;;
            ketama__subcmd__fleet__subcmd__plan__subcmd__help,run)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__run"
                ;;
            ketama__subcmd__fleet__subcmd__plan__subcmd__help,status)
                cmd="ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__status"
                ;;
            ketama__subcmd__help,analyze)
                cmd="ketama__subcmd__help__subcmd__analyze"
                ;;
            ketama__subcmd__help,bench)
                cmd="ketama__subcmd__help__subcmd__bench"
                ;;
            ketama__subcmd__help,diff)
                cmd="ketama__subcmd__help__subcmd__diff"
                ;;
            ketama__subcmd__help,fleet)
                cmd="ketama__subcmd__help__subcmd__fleet"
                ;;
            ketama__subcmd__help,generate)
                cmd="ketama__subcmd__help__subcmd__generate"
                ;;
            ketama__subcmd__help,help)
                cmd="ketama__subcmd__help__subcmd__help"
                ;;
            ketama__subcmd__help,import)
                cmd="ketama__subcmd__help__subcmd__import"
                ;;
            ketama__subcmd__help,migrate-plan)
                cmd="ketama__subcmd__help__subcmd__migrate__subcmd__plan"
                ;;
            ketama__subcmd__help,recommend)
                cmd="ketama__subcmd__help__subcmd__recommend"
                ;;
            ketama__subcmd__help,route)
                cmd="ketama__subcmd__help__subcmd__route"
                ;;
            ketama__subcmd__help,simulate)
                cmd="ketama__subcmd__help__subcmd__simulate"
                ;;
            ketama__subcmd__help,sweep)
                cmd="ketama__subcmd__help__subcmd__sweep"
                ;;
            ketama__subcmd__help__subcmd__fleet,plan)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__plan"
                ;;
            ketama__subcmd__help__subcmd__fleet,push)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__push"
                ;;
            ketama__subcmd__help__subcmd__fleet,rollout)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__rollout"
                ;;
            ketama__subcmd__help__subcmd__fleet,status)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__status"
                ;;
            ketama__subcmd__help__subcmd__fleet__subcmd__plan,abort)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__abort"
                ;;
            ketama__subcmd__help__subcmd__fleet__subcmd__plan,approve)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__approve"
                ;;
            ketama__subcmd__help__subcmd__fleet__subcmd__plan,pause)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__pause"
                ;;
            ketama__subcmd__help__subcmd__fleet__subcmd__plan,promote)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__promote"
                ;;
            ketama__subcmd__help__subcmd__fleet__subcmd__plan,resume)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__resume"
                ;;
            ketama__subcmd__help__subcmd__fleet__subcmd__plan,run)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__run"
                ;;
            ketama__subcmd__help__subcmd__fleet__subcmd__plan,status)
                cmd="ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__status"
                ;;
            ketama__subcmd__help__subcmd__import,haproxy)
                cmd="ketama__subcmd__help__subcmd__import__subcmd__haproxy"
                ;;
            ketama__subcmd__import,haproxy)
                cmd="ketama__subcmd__import__subcmd__haproxy"
                ;;
            ketama__subcmd__import,help)
                cmd="ketama__subcmd__import__subcmd__help"
                ;;
            ketama__subcmd__import__subcmd__help,haproxy)
                cmd="ketama__subcmd__import__subcmd__help__subcmd__haproxy"
                ;;
            ketama__subcmd__import__subcmd__help,help)
                cmd="ketama__subcmd__import__subcmd__help__subcmd__help"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        ketama)
            opts="-h -V --help --version route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__analyze)
            opts="-h --servers --compat --key-hash --layout --point-multiple --json --keys --key-config --key-template --key-balance --sort-query --drop-query --keep-query --lowercase-host --to-key-config --request-format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --servers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keys)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-balance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drop-query)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep-query)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-key-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-format)
                    COMPREPLY=($(compgen -W "target access-log" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__bench)
            opts="-h --nodes --weight --point-multiple --keys --rounds --compat --key-hash --json --subsets --layout --balance --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --nodes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --weight)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keys)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rounds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --subsets)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --balance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__diff)
            opts="-h --from --to --from-compat --from-key-hash --from-layout --from-point-multiple --to-compat --to-key-hash --to-layout --to-point-multiple --samples --keys --json --key-config --key-template --key-balance --sort-query --drop-query --keep-query --lowercase-host --to-key-config --request-format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --from)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from-compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from-key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from-layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from-point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --samples)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keys)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-balance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drop-query)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep-query)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-key-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-format)
                    COMPREPLY=($(compgen -W "target access-log" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet)
            opts="-h --help push rollout status plan help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help)
            opts="push rollout status plan help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__plan)
            opts="run status pause resume abort approve promote"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__abort)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__approve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__pause)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__promote)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__resume)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__plan__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__push)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__rollout)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__help__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan)
            opts="-h --help run status pause resume abort approve promote help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__abort)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --rollback --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__approve)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help)
            opts="run status pause resume abort approve promote help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__abort)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__approve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__pause)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__promote)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__resume)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__help__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__pause)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__promote)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__resume)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__run)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --prometheus --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prometheus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__plan__subcmd__status)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --json --chart --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --chart)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__push)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --config --expect-revision --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__rollout)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --global-bp --scope --expect-revision --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --global-bp)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scope)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --expect-revision)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__fleet__subcmd__status)
            opts="-h --etcd --prefix --user-env --password-env --ca-file --cert-file --key-file --timeout-ms --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --etcd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --password-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__generate)
            opts="-h --help man completions"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help)
            opts="route bench analyze sweep recommend diff migrate-plan simulate fleet import generate help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__analyze)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__bench)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__diff)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet)
            opts="push rollout status plan"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__plan)
            opts="run status pause resume abort approve promote"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__abort)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__approve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__pause)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__promote)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__resume)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__plan__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 5 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__push)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__rollout)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__fleet__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__generate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__import)
            opts="haproxy"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__import__subcmd__haproxy)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__migrate__subcmd__plan)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__recommend)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__route)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__simulate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__help__subcmd__sweep)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__import)
            opts="-h --help haproxy help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__import__subcmd__haproxy)
            opts="-h --backend --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --backend)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__import__subcmd__help)
            opts="haproxy help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__import__subcmd__help__subcmd__haproxy)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__import__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__migrate__subcmd__plan)
            opts="-h --from --to --from-compat --from-key-hash --from-layout --from-point-multiple --to-compat --to-key-hash --to-layout --to-point-multiple --steps --json --simulate --trace --trace-format --csv-key-col --csv-size-col --csv-time-col --csv-header --csv-delimiter --cache-key --objects --zipf --requests --seed --object-size --cache-objects --cache-bytes --cache-by-weight --warmup --requests-per-step --window --fill-from-previous --max-origin-factor --chart --key-config --key-template --key-balance --sort-query --drop-query --keep-query --lowercase-host --to-key-config --request-format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --from)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from-compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from-key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from-layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from-point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --steps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trace-format)
                    COMPREPLY=($(compgen -W "txt csv oracleGeneral" -- "${cur}"))
                    return 0
                    ;;
                --csv-key-col)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --csv-size-col)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --csv-time-col)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --csv-delimiter)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-key)
                    COMPREPLY=($(compgen -W "new-key target" -- "${cur}"))
                    return 0
                    ;;
                --objects)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --zipf)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --object-size)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-objects)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --warmup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requests-per-step)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --window)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-origin-factor)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --chart)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-balance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drop-query)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep-query)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-key-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-format)
                    COMPREPLY=($(compgen -W "target access-log" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__recommend)
            opts="-h --servers --max-cv --max-extra-error --compat --point-multiple --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --servers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-cv)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-extra-error)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__route)
            opts="-h --servers --compat --key-hash --layout --point-multiple --replicas --require --require-from-input --to --to-compat --to-key-hash --to-layout --to-point-multiple --rollout --scope-rollout --scope --key-config --key-template --key-balance --sort-query --drop-query --keep-query --lowercase-host --to-key-config --request-format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --servers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --replicas)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --require)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rollout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scope-rollout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scope)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-template)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-balance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drop-query)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep-query)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to-key-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-format)
                    COMPREPLY=($(compgen -W "target access-log" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__simulate)
            opts="-h --servers --compat --key-hash --layout --point-multiple --balance --requests --population --zipf --concurrency --service --seed --trace --json --plot --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --servers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key-hash)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --point-multiple)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --balance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --population)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --zipf)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --service)
                    COMPREPLY=($(compgen -W "exp fixed" -- "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trace)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        ketama__subcmd__sweep)
            opts="-h --nodes --from --to --steps --trials --seed --compat --out --plot --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --nodes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --steps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trials)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --plot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _ketama -o nosort -o bashdefault -o default ketama
else
    complete -F _ketama -o bashdefault -o default ketama
fi
