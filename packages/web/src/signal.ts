/** A value with subscribers, and the hook that re-renders a component when it changes. */
import { useEffect, useState } from "preact/hooks"

export interface Signal<A> {
  readonly get: () => A
  readonly set: (value: A) => void
  readonly subscribe: (listener: (value: A) => void) => () => void
}

export const signal = <A>(initial: A): Signal<A> => {
  let value = initial
  const listeners = new Set<(value: A) => void>()
  return {
    get: () => value,
    set: (next) => {
      value = next
      for (const listener of listeners) listener(next)
    },
    subscribe: (listener) => {
      listeners.add(listener)
      return () => void listeners.delete(listener)
    }
  }
}

export const useSignal = <A>(source: Signal<A>): A => {
  const [value, setValue] = useState(source.get())
  useEffect(() => {
    setValue(source.get())
    return source.subscribe(setValue)
  }, [source])
  return value
}
