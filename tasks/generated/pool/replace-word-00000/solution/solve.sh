#!/bin/bash
sed -i 's/\bcloud\b/maple/g' /app/readings.log
