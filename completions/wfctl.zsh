#compdef wfctl

_wfctl_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _WFCTL_COMPLETE=complete_zsh wfctl)
}

compdef _wfctl_completion wfctl
