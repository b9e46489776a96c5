// One aedes MQTT broker node on 127.0.0.1. Nodes started with the same redis
// share subscriptions, retained messages, QoS 1 queues and last wills
// (aedes-persistence-redis) and forward publishes to each other
// (mqemitter-redis): a cluster of two or more nodes, any of which a client may
// use. Without --redis the node keeps everything in memory (a single broker).
//
//   node tools/aedes/node.js --port 1883 [--redis 127.0.0.1:6379] [--id a]
//                            [--heartbeat-ms 1000]
//
// It prints "listening <port>" once it accepts connections and stops on
// SIGTERM/SIGINT. A node killed outright is noticed by the others after about
// three heartbeats; they then publish the last wills of its clients.
import { createServer } from 'node:net'
import { parseArgs } from 'node:util'
import { Aedes } from 'aedes'
import redisPersistence from 'aedes-persistence-redis'
import redisEmitter from 'mqemitter-redis'

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    redis: { type: 'string' },
    id: { type: 'string' },
    'heartbeat-ms': { type: 'string', default: '1000' }
  }
})
const port = Number(values.port)
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error('--port must be 1..65535')
  process.exit(2)
}

const options = {
  heartbeatInterval: Number(values['heartbeat-ms']),
  // a board that is slow to read must not stall delivery to everyone else
  drainTimeout: 30000,
  // enough for a job's burst of QoS 1 releases to a client that reconnects
  queueLimit: 1000,
  concurrency: 1000
}
if (values.id) options.id = values.id
if (values.redis) {
  const [host, redisPort] = values.redis.split(':')
  const where = { host, port: Number(redisPort || 6379), family: 4 }
  options.mq = redisEmitter(where)
  options.persistence = redisPersistence(where)
}

const broker = await Aedes.createBroker(options)
const server = createServer(broker.handle)

function stop () {
  server.close()
  broker.close(() => process.exit(0))
  setTimeout(() => process.exit(0), 3000).unref()
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)

server.listen(port, '127.0.0.1', () => {
  console.log(`listening ${port} id ${broker.id}`)
})
