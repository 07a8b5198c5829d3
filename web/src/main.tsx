import { render } from "preact";
import { App } from "./App";
import { SessionTokenSource } from "./auth/session";
import "./styles.css";

const root = document.getElementById("app");
if (root) render(<App source={new SessionTokenSource(window.sessionStorage)} />, root);
