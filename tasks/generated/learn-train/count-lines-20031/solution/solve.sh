#!/bin/bash
grep -cx cloud /app/visits.log > /app/result.txt
