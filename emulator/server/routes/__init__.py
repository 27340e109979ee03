"""HTTP routes, one module per resource; each stays thin and delegates to the service layer."""
