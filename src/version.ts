/** The WasmKeep version this build follows. */
export const VERSION = "0.1.0";
