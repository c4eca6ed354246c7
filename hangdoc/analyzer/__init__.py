"""Loading dumps and loose files, the Evidence model, the rule engine and the renderers."""
