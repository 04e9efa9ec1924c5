"""The shape of LangGraph's `react-agent` template, without a model: it answers offline."""
