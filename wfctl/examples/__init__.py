"""The example ETL workflow: `workflows.yaml.example` declares it with these handlers, and
`wfctl demo` copies etl.py beside the definitions it keeps, for the user to edit."""
