"""The polyhedral dependence graph and its passes."""
