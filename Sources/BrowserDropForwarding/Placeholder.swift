public enum BrowserDropForwardingPlaceholder {}
