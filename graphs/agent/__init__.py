"""The agent core both roles share: the tool-calling loop (`loop`), MCP servers as LangChain tools
(`mcp_tools`), how a node runs another compiled graph (`nesting`), where we work around
LangGraph (`langgraph_adapter`) and scripted replies for tests and demos (`scripted_model`)."""
