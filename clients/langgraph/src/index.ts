/**
 * @shredd/langgraph: LangGraph.js over shredd (docs/clients.md): a
 * checkpoint saver and a store whose data a forget of its subjects erases.
 */
export { ShreddSaver, SEALED, type ShreddSaverOptions, type SubjectsOf, type Configurable } from "./saver.js";
export { ShreddStore, type ShreddStoreOptions, type SubjectsOfItem, type StoreIndex } from "./store.js";
export { Reads, stampSteps, currentStep, type Step, type Declaration, type Rule } from "./reads.js";
