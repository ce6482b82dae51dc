_wfctl_completion() {
    local IFS=$'
'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \
                   COMP_CWORD=$COMP_CWORD \
                   _WFCTL_COMPLETE=complete_bash $1 ) )
    return 0
}

complete -o default -F _wfctl_completion wfctl
