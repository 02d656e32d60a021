print("test host: not built yet")
