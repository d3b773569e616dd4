"""The web UI and Storm's UI REST API (`/api/v1/...`), for the local cluster
(`stormish run --ui PORT`), a nimbus (`stormish nimbus --ui-port PORT`) and any operator
machine holding the cluster's keys (`stormish ui --nimbus ADDR`)."""
