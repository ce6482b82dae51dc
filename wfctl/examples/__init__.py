"""The example ETL workflow that `wfctl demo` runs and `workflows.yaml.example` declares."""
