#if !os(Linux)
  #error("BrowserDrop runs on Linux only: its system layer is epoll, eventfd, splice and Glibc.")
#endif
