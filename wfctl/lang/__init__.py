"""The workflow language: workflows.yaml read into frozen definitions, durations, `--since`,
finding and calling handlers, and the context a handler is given."""
