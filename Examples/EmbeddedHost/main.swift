print("EmbeddedHost: not written yet")
