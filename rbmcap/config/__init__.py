"""Reading configuration: where the packaged YAML lives (:mod:`~rbmcap.config.packaged`), safe YAML
loading with ``file:line:column`` errors (:mod:`~rbmcap.config.safe_yaml`), checks of single values
(:mod:`~rbmcap.config.values`) and structured configs composed through ``defaults:`` lists
(:mod:`~rbmcap.config.compose`)."""
